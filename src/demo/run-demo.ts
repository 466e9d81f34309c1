import { randomBytes } from 'node:crypto';
import { Runtime } from '@temporalio/worker';
import cliProgress from 'cli-progress';
import type pg from 'pg';
import { createActivities } from '../../activities/index.ts';
import type { SyncProgress, SyncResult } from '../../contract/workflows.ts';
import { createServiceClient } from '../api/index.ts';
import { formatDuration } from '../common/table.ts';
import { type Config, parseConfig } from '../config.ts';
import { CrsError } from '../errors.ts';
import { createLogger, type Logger } from '../log.ts';
import { startSimulator } from '../simulator/index.ts';
import { connectClient, connectWorker } from '../temporal/connection.ts';
import { followRun, startBackfill } from '../temporal/runs.ts';
import {
  createOrUpdateSchedule,
  deleteSchedule,
  describeSchedule,
  SCHEDULE_ID,
} from '../temporal/schedules.ts';
import { pinoSdkLogger } from '../temporal/sdk-logger.ts';
import { createSyncWorker } from '../temporal/worker.ts';
import { parseWorkerSettings } from '../temporal/worker-settings.ts';
import { readBi, readFigures } from '../warehouse/read/index.ts';
import type { DemoOptions } from './options.ts';
import { demoDataset, demoWindow } from './options.ts';
import { Stack } from './stack.ts';
import { type DemoSummary, renderSummary } from './summary.ts';
import { startDemoTemporal } from './temporal.ts';
import { openDemoWarehouse } from './warehouse.ts';

/** Settings of the real service a user's .env may hold; the demo always talks to its simulator. */
const SERVICE_VARIABLES = [
  'CRS_BASE_URL',
  'CRS_LEGACY_BASE_URL',
  'CRS_SERVICE_ACCOUNT_TOKEN',
  'CRS_ACCESS_TOKEN',
  'CRS_TOKEN_URL',
  'CRS_CLIENT_ID',
  'CRS_CLIENT_SECRET',
  'CRS_API_KEY',
];
const TEMPORAL_SECURITY_VARIABLES = [
  'TEMPORAL_API_KEY',
  'TEMPORAL_TLS_CERT_PATH',
  'TEMPORAL_TLS_KEY_PATH',
  'TEMPORAL_TLS_CA_PATH',
  'TEMPORAL_TLS_SERVER_NAME',
];

export interface DemoIo {
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream & { isTTY?: boolean };
  /** The environment after .env was read. */
  env: Record<string, string | undefined>;
}

/**
 * `crs-sync demo`: the whole system on this machine, end to end. Starts a warehouse (DATABASE_URL
 * or a throw-away embedded PostgreSQL), the simulator, a Temporal dev server and a worker in this
 * process; backfills the window with progress, creates the daily schedule, prints a summary and
 * a few BI query results. Everything started here is stopped here (also on Ctrl-C); with `keep`
 * it stays up until Ctrl-C. Returns the exit status.
 *
 * Long: it is the demo's one story, from the first server started to the last one stopped; its
 * steps share the abort signal, the stop stack and the step reporter, and read best in order.
 */
export async function runDemo(opts: DemoOptions, io: DemoIo): Promise<number> {
  const startedAt = Date.now();
  const say = (line: string) => io.err.write(`${line}\n`);
  const stack = new Stack((line) => say(`crs-sync demo: ${line}`));
  const log = createLogger({ level: (io.env.LOG_LEVEL as Logger['level'] | undefined) ?? 'warn' });

  // Ctrl-C (or SIGTERM) stops whatever step is running; a second one exits at once.
  const abort = new AbortController();
  const aborted = new Promise<never>((_, reject) => {
    abort.signal.addEventListener('abort', () => reject(new CrsError('CANCELLED', 'interrupted')));
  });
  aborted.catch(() => {});
  let signals = 0;
  let keepWaiting = false;
  const onSignal = (sig: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      say(`crs-sync demo: ${sig} again, exiting without cleaning up`);
      process.exit(1);
    }
    say(`\ncrs-sync demo: ${sig}, stopping everything the demo started…`);
    abort.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const until = <T>(p: Promise<T>): Promise<T> => Promise.race([p, aborted]);

  // A step runs to its end even when Ctrl-C comes meanwhile (each is bounded: a server start), so
  // what it started is registered and stopped; the interruption is honoured right after.
  const step = async <T>(
    name: string,
    f: () => Promise<T>,
    describe: (v: T) => string,
    stop?: (v: T) => Promise<void>,
  ): Promise<T> => {
    const t0 = Date.now();
    let v: T;
    try {
      v = await f();
    } catch (err) {
      if (err instanceof CrsError) throw err;
      throw new CrsError('INTERNAL', `${name}: ${(err as Error).message ?? String(err)}`, { cause: err });
    }
    if (stop) stack.add(name, () => stop(v));
    if (abort.signal.aborted) throw new CrsError('CANCELLED', 'interrupted');
    say(`  ${name.padEnd(10)} ${describe(v)} (${formatDuration(Date.now() - t0)})`);
    return v;
  };

  try {
    // The SDK runtime first (it must exist before any connection); signals stay the demo's own.
    Runtime.install({
      logger: pinoSdkLogger(log),
      shutdownSignals: [],
      telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} } },
    });

    const window = demoWindow(opts.days, new Date());
    // With DATABASE_URL the demo never writes simulated data into the default schema `crs` by
    // accident: it uses CRS_SCHEMA when that is set, else `crs_demo`.
    const schema = io.env.CRS_SCHEMA ?? (io.env.DATABASE_URL ? 'crs_demo' : 'crs');
    say(
      `crs-sync demo: ${opts.days} day(s) ${window.from} .. ${window.to}, ~${opts.recordsPerDay} records/day, seed ${opts.seed}`,
    );

    const connections = opts.concurrency * 4 + 12;
    const wh = await step(
      'warehouse',
      () => openDemoWarehouse({ databaseUrl: io.env.DATABASE_URL, schema, connections }),
      (w) =>
        w.embedded
          ? `embedded PostgreSQL (throw-away) at ${new URL(w.url).host}, schema ${w.schema}`
          : `${w.shownUrl}, schema ${w.schema}`,
      (w) => w.close(),
    );

    const sim = await step(
      'simulator',
      () => startSimulator({ port: 0, ...demoDataset(opts) }),
      (s) => `${s.baseUrl} (a local stand-in for the service)`,
      (s) => s.close(),
    );

    const temporal = await step(
      'temporal',
      () =>
        startDemoTemporal({
          address: opts.temporalAddress,
          namespace: io.env.TEMPORAL_NAMESPACE ?? 'default',
          log: (m) => say(`  temporal   ${m}`),
        }),
      (t) =>
        t.own
          ? `dev server at ${t.address}, UI ${t.uiUrl}`
          : `${t.address} (namespace ${t.namespace}), not started by the demo`,
      (t) => t.stop(),
    );

    // On a server the demo does not own, a task queue of its own keeps other workers off its work.
    const taskQueue = temporal.own
      ? (io.env.TEMPORAL_TASK_QUEUE ?? 'crs-sync')
      : `crs-sync-demo-${randomBytes(4).toString('hex')}`;
    const config = demoConfig(io.env, sim.env(), { url: wh.url, schema, temporal, taskQueue });

    const worker = await step(
      'worker',
      async () => {
        const connection = await connectWorker(config.temporal);
        stack.add('the worker connection', () => connection.close());
        const client = createServiceClient({ ...config.api, concurrency: config.enrichConcurrency }, log);
        const w = await createSyncWorker({
          connection,
          namespace: config.temporal.namespace,
          taskQueue,
          activities: createActivities({ warehouse: wh.warehouse, client, config, log }),
          // The worker's own defaults; no metrics endpoint, and a short grace on Ctrl-C (a day cut
          // off resumes from its checkpoint on a later run).
          settings: parseWorkerSettings({
            ...io.env,
            TEMPORAL_METRICS_ADDRESS: '',
            TEMPORAL_SHUTDOWN_GRACE: '3s',
          }),
        });
        const running = w.run();
        running.catch(() => {});
        stack.add('the worker', async () => {
          if (w.getState() === 'RUNNING') w.shutdown();
          await running.catch(() => {});
        });
        return { worker: w, running };
      },
      () => `in this process, task queue ${taskQueue}`,
    );
    const workerStopped = worker.running.then(
      () => {
        throw new CrsError('INTERNAL', 'the worker stopped before the backfill finished');
      },
      (err: unknown) => {
        throw new CrsError('INTERNAL', `the worker failed: ${(err as Error).message}`, { cause: err });
      },
    );
    workerStopped.catch(() => {});

    const t = await connectClient(config.temporal);
    stack.add('the Temporal client', () => t.close());
    if (abort.signal.aborted) throw new CrsError('CANCELLED', 'interrupted');
    // Calls in flight when Ctrl-C comes are cancelled, so none is left retrying on a closed channel.
    const call = <T>(f: () => Promise<T>): Promise<T> => until(t.connection.withAbortSignal(abort.signal, f));

    // The backfill, followed with a progress bar (plain lines when stderr is not a terminal).
    const handle = await call(() =>
      startBackfill(t.client, taskQueue, {
        from: window.from,
        to: window.to,
        concurrency: opts.concurrency,
        enrich: true,
      }),
    );
    say(`  backfill   ${handle.workflowId}`);
    const progress = progressReporter(io.err);
    let result: SyncResult;
    try {
      result = await Promise.race([
        call(() => followRun(t.client, handle, { onProgress: progress.update, intervalMs: 500 })),
        workerStopped,
      ]);
    } finally {
      progress.stop();
    }
    say(
      `  backfill   ${result.days} day(s), ${result.totals.rowsRead} rows read, ` +
        `${result.failedDays.length} failed day(s)` +
        (result.enrich ? `, ${result.enrich.threads} thread(s) enriched` : ''),
    );

    const scheduleAction = await call(() => createOrUpdateSchedule(t.client, { taskQueue }));
    const described = await call(() => describeSchedule(t.client));
    const removeSchedule = !temporal.own && !opts.keep;
    if (removeSchedule) stack.add('the schedule', () => deleteSchedule(t.client));
    const nextRun = described.info.nextActionTimes[0]?.toISOString() ?? null;
    say(`  schedule   ${SCHEDULE_ID} ${scheduleAction}, next run ${nextRun ?? '-'}`);

    const figures = await until(readFigures(wh.warehouse.pool));
    const bi = await until(readBi(wh.warehouse.pool));
    const ok = result.failedDays.length === 0 && figures.daysFailed === 0;
    const summary: DemoSummary = {
      ok,
      window: { ...window, days: opts.days },
      elapsedMs: Date.now() - startedAt,
      simulator: { seed: opts.seed, recordsPerDay: opts.recordsPerDay },
      warehouse: { url: wh.shownUrl, schema, embedded: wh.embedded },
      temporal: {
        address: temporal.address,
        namespace: temporal.namespace,
        taskQueue,
        uiUrl: temporal.uiUrl ?? null,
        own: temporal.own,
      },
      backfill: backfillFigures(handle.workflowId, result),
      schedule: { id: SCHEDULE_ID, action: scheduleAction, nextRun, removedAtExit: removeSchedule },
      figures,
      bi,
    };
    io.out.write(opts.json ? `${JSON.stringify(summary, null, 2)}\n` : renderSummary(summary));

    if (opts.keep) {
      // The dashboard over the demo's warehouse (port 8787, else any free one); the demo runs
      // without it if it cannot start.
      const dashboard = await startDemoDashboard(wh.warehouse.pool, `${wh.shownUrl} (schema ${schema})`).then(
        (d) => {
          stack.add('the dashboard', d.close);
          return `  dashboard     ${d.url}/`;
        },
        (err: unknown) => `  dashboard     not started: ${(err as Error).message}`,
      );
      say(
        keptStackLines({ dashboard, temporal, taskQueue, warehouseUrl: wh.shownUrl, schema, sim }).join('\n'),
      );
      keepWaiting = true;
      await aborted.catch(() => {});
      return 0;
    }
    if (!opts.json) say('\nTo look around in the dashboard (and keep the stack up): crs-sync demo --keep');
    return ok ? 0 : 1;
  } catch (err) {
    if (err instanceof CrsError && err.code === 'CANCELLED') {
      say(keepWaiting ? 'crs-sync demo: stopped' : 'crs-sync demo: interrupted');
      return keepWaiting ? 0 : 1;
    }
    throw err;
  } finally {
    await stack.stop();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/**
 * The configuration the demo's worker runs with: the user's environment without the real
 * service's settings (and without Temporal credentials when the demo owns the server), plus the
 * simulator's CRS_* variables (credentials included; they go into this process only, nothing
 * prints them), the demo's warehouse and Temporal.
 */
function demoConfig(
  env: Record<string, string | undefined>,
  simEnv: Record<string, string>,
  at: {
    url: string;
    schema: string;
    temporal: { own: boolean; address: string; namespace: string };
    taskQueue: string;
  },
): Config {
  const base: Record<string, string | undefined> = { ...env };
  // A secret's file setting too (CRS_API_KEY_FILE): beside the simulator's value it would be both set.
  const drop = (k: string) => {
    delete base[k];
    delete base[`${k}_FILE`];
  };
  SERVICE_VARIABLES.forEach(drop);
  if (at.temporal.own) TEMPORAL_SECURITY_VARIABLES.forEach(drop);
  return parseConfig({
    ...base,
    ...simEnv,
    DATABASE_URL: at.url,
    CRS_SCHEMA: at.schema,
    TEMPORAL_ADDRESS: at.temporal.address,
    TEMPORAL_NAMESPACE: at.temporal.namespace,
    TEMPORAL_TASK_QUEUE: at.taskQueue,
    // The simulator is local: the service's default budget (10/s) would only slow the demo.
    CRS_RATE_LIMIT_RPS: env.CRS_RATE_LIMIT_RPS ?? '500',
  });
}

function backfillFigures(workflowId: string, result: SyncResult): DemoSummary['backfill'] {
  return {
    workflowId,
    loadId: result.runId,
    rowsRead: result.totals.rowsRead,
    inserted: result.totals.inserted,
    updated: result.totals.updated,
    unchanged: result.totals.unchanged,
    rejected: result.totals.rejected,
    failedDays: result.failedDays,
  };
}

/** What `--keep` tells the user about the stack it leaves running. */
function keptStackLines(k: {
  dashboard: string;
  temporal: { address: string; namespace: string; uiUrl?: string | undefined };
  taskQueue: string;
  warehouseUrl: string;
  schema: string;
  sim: { baseUrl: string };
}): string[] {
  return [
    '',
    'The stack stays up until Ctrl-C:',
    k.dashboard,
    ...(k.temporal.uiUrl
      ? [`  Temporal UI   ${k.temporal.uiUrl}/namespaces/${k.temporal.namespace}/workflows`]
      : []),
    `  Temporal      ${k.temporal.address} (namespace ${k.temporal.namespace}, task queue ${k.taskQueue})`,
    `  warehouse     ${k.warehouseUrl} (schema ${k.schema})`,
    `  psql          psql '${k.warehouseUrl}' -c 'set search_path = ${k.schema}' -c 'select * from sync_health'`,
    `  simulator     ${k.sim.baseUrl}/openapi.json`,
  ];
}

function progressReporter(err: NodeJS.WritableStream & { isTTY?: boolean }) {
  const bar =
    err.isTTY === true
      ? new cliProgress.SingleBar(
          {
            stream: err,
            format: '  backfill   |{bar}| {value}/{total} days | {rows} rows | {phase}',
            hideCursor: true,
          },
          cliProgress.Presets.shades_classic,
        )
      : undefined;
  let started = false;
  let last = '';
  return {
    update: (p: SyncProgress) => {
      const payload = {
        rows: p.totals.rowsRead,
        phase: p.phase === 'enriching' && p.enrich ? `enriching (${p.enrich.threads} threads)` : p.phase,
      };
      if (bar) {
        if (!started) bar.start(Math.max(p.daysTotal, 1), p.daysDone, payload);
        started = true;
        bar.update(p.daysDone, payload);
        return;
      }
      const line = `  backfill   ${p.phase}: ${p.daysDone}/${p.daysTotal} days, ${p.totals.rowsRead} rows`;
      if (line !== last) err.write(`${line}\n`);
      last = line;
    },
    stop: () => {
      if (started) bar?.stop();
    },
  };
}

/** `crs-sync dashboard` inside the demo: on its usual port, or any free one when that is taken. */
async function startDemoDashboard(
  pool: pg.Pool,
  warehouse: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const { DEFAULT_DASHBOARD_PORT, startDashboard } = await import('../dashboard/server.ts');
  return startDashboard({ pool, port: DEFAULT_DASHBOARD_PORT, warehouse }).catch(
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') return startDashboard({ pool, port: 0, warehouse });
      throw err;
    },
  );
}
