import type { Command } from 'commander';
import { connectClient } from '../../temporal/connection.ts';
import {
  createOrUpdateSchedule,
  DEFAULT_CATCHUP_WINDOW,
  DEFAULT_CRON,
  DEFAULT_TIMEZONE,
  deleteSchedule,
  describeSchedule,
  formatSchedule,
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

/** Long: one commander definition of five subcommands, each a few lines. */
export function registerSchedule(program: Command): void {
  const schedule = program
    .command('schedule')
    .description(
      `manage the daily Temporal Schedule (${SCHEDULE_ID}); two syncs never run at once: a run due ` +
        'while one is going (manual triggers included) waits for it',
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
      ALLOW_EMBEDDED_FLAG,
      'create it even though DATABASE_URL is not set (workers on the embedded PostgreSQL; CRS_ALLOW_EMBEDDED=1)',
    )
    .action(
      async (o: {
        cron: string;
        timezone: string;
        catchupWindow: string;
        enrich: boolean;
        allowEmbedded?: boolean;
      }) => {
        // Scheduling unattended runs from an environment with no warehouse is the missing-secret
        // deployment the worker refuses too.
        await withClient(
          async (t, taskQueue) => {
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
    .description('show the schedule: state, next runs, running and recent runs')
    .option('--json', 'print the description as JSON')
    .action(async (o: { json?: boolean }) => {
      await withClient(async (t) => {
        const d = await describeSchedule(t.client);
        if (o.json) {
          const { raw: _raw, ...rest } = d;
          process.stdout.write(`${JSON.stringify(rest, null, 2)}\n`);
        } else {
          process.stdout.write(`${formatSchedule(d).join('\n')}\n`);
        }
      });
    });
  schedule
    .command('pause')
    .option('--note <text>', 'why (shown by describe)')
    .action(async (o: { note?: string }) => {
      await withClient(async (t) => {
        await pauseSchedule(t.client, o.note);
        process.stdout.write(`schedule ${SCHEDULE_ID} paused\n`);
      });
    });
  schedule
    .command('unpause')
    .option('--note <text>', 'why (shown by describe)')
    .action(async (o: { note?: string }) => {
      await withClient(async (t) => {
        await unpauseSchedule(t.client, o.note);
        process.stdout.write(`schedule ${SCHEDULE_ID} unpaused\n`);
      });
    });
  schedule
    .command('trigger')
    .description('start a scheduled sync now (waits for a running one first)')
    .action(async () => {
      await withClient(async (t) => {
        await triggerSchedule(t.client);
        process.stdout.write(`schedule ${SCHEDULE_ID} triggered\n`);
      });
    });
  schedule
    .command('delete')
    .description('delete the schedule (running syncs go on)')
    .action(async () => {
      await withClient(async (t) => {
        await deleteSchedule(t.client);
        process.stdout.write(`schedule ${SCHEDULE_ID} deleted\n`);
      });
    });
}
