import type { Command } from 'commander';
import { escapeControls } from '../../common/terminal-text.ts';
import { CrsError } from '../../errors.ts';
import { connectClient } from '../../temporal/connection.ts';
import { noWorkerWarning, workersPolling } from '../../temporal/pollers.ts';
import {
  createOrUpdateIntradaySchedule,
  createOrUpdateSchedule,
  DEFAULT_CATCHUP_WINDOW,
  DEFAULT_CRON,
  DEFAULT_TIMEZONE,
  deleteSchedule,
  describeIfExists,
  describeSchedule,
  formatMissingSchedule,
  formatSchedule,
  INTRADAY_SCHEDULE_ID,
  parseIntradayEvery,
  pauseSchedule,
  SCHEDULE_ID,
  triggerSchedule,
  unpauseSchedule,
} from '../../temporal/schedules.ts';
import { ALLOW_EMBEDDED_FLAG, loadContext, refuseEmbeddedUnlessAllowed } from '../context.ts';
import { releaseForeignExitHooks } from '../process-hooks.ts';

async function withClient(
  f: (c: Awaited<ReturnType<typeof connectClient>>, taskQueue: string) => Promise<void>,
  before: (ctx: ReturnType<typeof loadContext>) => void = () => {},
) {
  releaseForeignExitHooks();
  const ctx = loadContext();
  before(ctx);
  const t = await connectClient(ctx.config.temporal);
  try {
    await f(t, ctx.config.temporal.taskQueue);
  } finally {
    await t.close();
  }
}

const INTRADAY_FLAG = '--intraday';
const INTRADAY_HELP = `the intraday schedule (${INTRADAY_SCHEDULE_ID}) instead of the daily one`;
const idOf = (o: { intraday?: boolean }) => (o.intraday ? INTRADAY_SCHEDULE_ID : SCHEDULE_ID);

/** Long: one commander definition of six subcommands, each a few lines. */
export function registerSchedule(program: Command): void {
  const schedule = program
    .command('schedule')
    .description(
      `manage the Temporal Schedules: the daily one (${SCHEDULE_ID}) and, with --intraday, the intraday one ` +
        `(${INTRADAY_SCHEDULE_ID}). Two runs of a schedule never overlap: a daily run due while one is ` +
        'going (manual triggers included) waits for it; an intraday pull due then is skipped',
    );
  schedule
    .command('create')
    .description('create the schedule, or update it to these options when it exists')
    .option('--cron <expr>', 'when to run (cron, five fields)', DEFAULT_CRON)
    .option('--timezone <tz>', 'IANA time zone of the cron expression', DEFAULT_TIMEZONE)
    .option(
      '--catchup-window <duration>',
      'how far back missed runs are still taken after an outage',
      DEFAULT_CATCHUP_WINDOW,
    )
    .option('--no-enrich', 'scheduled runs skip thread enrichment')
    .option(
      '--intraday <every>',
      `create (or update) the intraday schedule (${INTRADAY_SCHEDULE_ID}) instead: pull the open UTC day every EVERY (15m, 1h; 5m to 12h) as a partial day that never deletes, and the day that just closed once after 00:30 UTC; off unless created`,
    )
    .option(
      ALLOW_EMBEDDED_FLAG,
      'create it even though DATABASE_URL is not set (workers on the embedded PostgreSQL; CRS_ALLOW_EMBEDDED=1)',
    )
    .action(
      async (o: {
        cron: string;
        timezone: string;
        catchupWindow: string;
        enrich: boolean;
        intraday?: string;
        allowEmbedded?: boolean;
      }) => {
        // A bad interval is a usage error before any connection.
        if (o.intraday !== undefined) parseIntradayEvery(o.intraday);
        // Scheduling unattended runs from an environment with no warehouse is the missing-secret
        // deployment the worker refuses too.
        await withClient(
          async (t, taskQueue) => {
            if (o.intraday !== undefined) {
              const what = await createOrUpdateIntradaySchedule(t.client, {
                taskQueue,
                every: o.intraday,
                enrich: o.enrich,
              });
              process.stdout.write(`schedule ${INTRADAY_SCHEDULE_ID} ${what}: every ${o.intraday}\n`);
              return;
            }
            const what = await createOrUpdateSchedule(t.client, {
              taskQueue,
              cron: o.cron,
              timezone: o.timezone,
              catchupWindow: o.catchupWindow,
              enrich: o.enrich,
            });
            process.stdout.write(`schedule ${SCHEDULE_ID} ${what}: "${o.cron}" ${o.timezone}\n`);
          },
          (ctx) => refuseEmbeddedUnlessAllowed(ctx, 'schedule create', o.allowEmbedded),
        );
      },
    );
  schedule
    .command('describe')
    .description(
      `show the schedules, the daily (${SCHEDULE_ID}) and the intraday one (${INTRADAY_SCHEDULE_ID}): ` +
        'state, when they run, next runs, running and recent runs; exit 2 when neither exists',
    )
    .option(
      '--json',
      'print JSON: {"daily": …, "intraday": …}, null for one not created (with --daily or --intraday: that one\'s description)',
    )
    .option('--daily', `only the daily schedule (${SCHEDULE_ID})`)
    .option(INTRADAY_FLAG, `only the intraday schedule (${INTRADAY_SCHEDULE_ID})`)
    .action(async (o: { json?: boolean; intraday?: boolean; daily?: boolean }) => {
      await withClient(async (t) => {
        if (o.daily || o.intraday) {
          const d = await describeSchedule(t.client, o.intraday ? INTRADAY_SCHEDULE_ID : SCHEDULE_ID);
          const { raw: _raw, ...rest } = d;
          process.stdout.write(
            o.json
              ? `${JSON.stringify(rest, null, 2)}\n`
              : `${formatSchedule(d).map(escapeControls).join('\n')}\n`,
          );
          return;
        }
        const daily = await describeIfExists(t.client, SCHEDULE_ID);
        const intraday = await describeIfExists(t.client, INTRADAY_SCHEDULE_ID);
        if (!daily && !intraday) {
          throw new CrsError(
            'USAGE',
            `no schedule: create the daily one with \`crs-sync schedule create\` (and the intraday one with \`crs-sync schedule create --intraday EVERY\`)`,
          );
        }
        if (o.json) {
          const plain = (d: typeof daily) => (d ? (({ raw: _raw, ...rest }) => rest)(d) : null);
          process.stdout.write(
            `${JSON.stringify({ daily: plain(daily), intraday: plain(intraday) }, null, 2)}\n`,
          );
          return;
        }
        const parts = [
          daily ? formatSchedule(daily) : formatMissingSchedule(SCHEDULE_ID),
          intraday ? formatSchedule(intraday) : formatMissingSchedule(INTRADAY_SCHEDULE_ID),
        ];
        process.stdout.write(`${parts.map((p) => p.map(escapeControls).join('\n')).join('\n\n')}\n`);
      });
    });
  schedule
    .command('pause')
    .description(
      'pause the schedule: no run starts until unpause (running ones go on; a note says why, shown by describe)',
    )
    .option('--note <text>', 'why (shown by describe)')
    .option(INTRADAY_FLAG, INTRADAY_HELP)
    .action(async (o: { note?: string; intraday?: boolean }) => {
      await withClient(async (t) => {
        await pauseSchedule(t.client, o.note, idOf(o));
        process.stdout.write(`schedule ${idOf(o)} paused\n`);
      });
    });
  schedule
    .command('unpause')
    .description('resume a paused schedule: its runs start again as they come due')
    .option('--note <text>', 'why (shown by describe)')
    .option(INTRADAY_FLAG, INTRADAY_HELP)
    .action(async (o: { note?: string; intraday?: boolean }) => {
      await withClient(async (t) => {
        await unpauseSchedule(t.client, o.note, idOf(o));
        process.stdout.write(`schedule ${idOf(o)} unpaused\n`);
      });
    });
  schedule
    .command('trigger')
    .description('start a scheduled sync now (waits for a running one first)')
    .option(INTRADAY_FLAG, INTRADAY_HELP)
    .action(async (o: { intraday?: boolean }) => {
      await withClient(async (t, configured) => {
        await triggerSchedule(t.client, idOf(o));
        process.stdout.write(`schedule ${idOf(o)} triggered\n`);
        // The run goes to the schedule's own task queue, which may not be this shell's.
        const d = await describeSchedule(t.client, idOf(o));
        const taskQueue = d.action.type === 'startWorkflow' ? d.action.taskQueue : configured;
        if ((await workersPolling(t.client, taskQueue).catch(() => undefined)) === 0) {
          process.stderr.write(noWorkerWarning(taskQueue, t.client.options.namespace, 'the triggered run'));
        }
      });
    });
  schedule
    .command('delete')
    .description('delete the schedule (running syncs go on)')
    .option(INTRADAY_FLAG, INTRADAY_HELP)
    .action(async (o: { intraday?: boolean }) => {
      await withClient(async (t) => {
        await deleteSchedule(t.client, idOf(o));
        process.stdout.write(`schedule ${idOf(o)} deleted\n`);
      });
    });
}
