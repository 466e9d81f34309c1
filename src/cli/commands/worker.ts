import type { Command } from 'commander';
import { createActivities, DEFAULT_MAX_DAY_LOADS } from '../../../activities/index.ts';
import { alertSettings, startAlertMonitor } from '../../alerts/monitor.ts';
import { onAlertSent } from '../../alerts/sender.ts';
import { describeTarget } from '../../alerts/webhook.ts';
import { createDeploymentClient } from '../../api/deployment-client.ts';
import { requireSettings } from '../../config.ts';
import { CrsError, errorMessage } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import {
  ALERT_KINDS,
  type AlertKind,
  countAlertSent,
  type SchemaDriftCount,
  setFreshnessReader,
  setOpenDayStaleAfter,
  setSchemaDriftReader,
  setWarehouseReader,
} from '../../metrics/pipeline.ts';
import { serveMetrics } from '../../metrics/server.ts';
import { connectWorker } from '../../temporal/connection.ts';
import { createSyncWorker, installRuntime } from '../../temporal/worker.ts';
import {
  METRICS_SPARE_PORTS,
  parseWorkerSettings,
  WORKER_SETTINGS_HELP,
  type WorkerSettings,
} from '../../temporal/worker-settings.ts';
import { deploymentFreshnessSla, JUDGED_SETTING_NAMES } from '../../warehouse/alert-settings.ts';
import { openWarehouse } from '../../warehouse/db.ts';
import { readWarehouseGauges } from '../../warehouse/gauges.ts';
import { listSchemaDrift, queryable, readFreshness } from '../../warehouse/read/index.ts';
import {
  ALLOW_EMBEDDED_FLAG,
  loadContext,
  type OpenedWarehouse,
  openConfiguredWarehouse,
  refuseEmbeddedUnlessAllowed,
} from '../context.ts';
import { releaseForeignExitHooks } from '../process-hooks.ts';

/** Long: one commander definition, its options then its action, read top to bottom. */
export function registerWorker(program: Command): void {
  program
    .command('worker')
    .description(
      'run a Temporal worker on TEMPORAL_TASK_QUEUE: the sync workflows and their activities. ' +
        'SIGTERM/SIGINT drain it: polling stops, running activities get TEMPORAL_SHUTDOWN_GRACE to ' +
        'finish (a load cut short resumes from its checkpoint elsewhere); alert messages being sent ' +
        'get 5 s, then are cut off and left due for another worker. Prometheus metrics (the ' +
        "pipeline's and the SDK's) on CRS_METRICS_PORT (/metrics; 0: off; a taken port: the next " +
        'free one, with a warning). Without DATABASE_URL it refuses to start (exit 2) ' +
        `unless ${ALLOW_EMBEDDED_FLAG} or CRS_ALLOW_EMBEDDED=1.`,
    )
    .option(
      ALLOW_EMBEDDED_FLAG,
      'run on the embedded PostgreSQL in .data/postgres when DATABASE_URL is not set (a local worker)',
    )
    .addHelpText('after', workerHelp())
    .action(
      // Long: the worker's life, from its settings to the drain on a signal, read top to bottom.
      async (o: { allowEmbedded?: boolean }) => {
        releaseForeignExitHooks();
        const ctx = loadContext();
        refuseEmbeddedUnlessAllowed(ctx, 'worker', o.allowEmbedded);
        const settings = parseWorkerSettings(process.env);
        const dayLoads = settings.maxConcurrentDayLoads ?? DEFAULT_MAX_DAY_LOADS;
        requireSettings(ctx.config, ['export']);
        const { config, log } = ctx;
        try {
          requireSettings(config, ['threads']);
        } catch (err) {
          // Loads work without it; runs with enrichment will fail (not retried) until it is set.
          // Expected, and said in full by its problems: the stack is for LOG_LEVEL=debug.
          const problems = err instanceof CrsError ? err.details?.problems : undefined;
          log.warn(
            {
              problems: Array.isArray(problems) ? problems : [errorMessage(err)],
              ...(log.isLevelEnabled('debug') ? { err } : {}),
            },
            'thread API credentials are missing: enrichment will fail; use --no-enrich',
          );
        }
        // The SDK runtime (logs, metrics, signal handling) must exist before any connection.
        const sdkMetrics = await installRuntime(log, settings.metrics !== undefined);
        // Day loads hold their connections throughout; enrichment batches and bookkeeping need a few more.
        const opened = await openConfiguredWarehouse(ctx, {
          connections: dayLoads * config.loadConnections + config.enrichConcurrency,
        });
        const metrics = await startMetrics(
          opened,
          settings,
          sdkMetrics,
          log,
          config.freshnessSlaSeconds,
          config.openDayStaleAfterSeconds,
        );
        try {
          // CRS_RATE_LIMIT_RPS is the tenant's: shared with every worker through the warehouse.
          const { client, close: closeBudget } = createDeploymentClient(config, opened.warehouse, log);
          const connection = await connectWorker(config.temporal);
          try {
            const worker = await createSyncWorker({
              connection,
              namespace: config.temporal.namespace,
              taskQueue: config.temporal.taskQueue,
              activities: createActivities({
                warehouse: opened.warehouse,
                client,
                config,
                log,
                maxDayLoads: dayLoads,
              }),
              settings,
            });
            // Alerts check from every worker: the warehouse sees to one message per incident. On
            // a signal the monitor stops beside the drain, its sends cut off after a few seconds
            // (ALERT_STOP_GRACE_MS).
            const monitor = startAlertMonitor(opened.warehouse.db, alertSettings(config), log);
            for (const sig of ['SIGTERM', 'SIGINT'] as const) {
              process.once(sig, () => {
                log.info({ signal: sig }, 'draining the worker');
                void monitor.stop();
              });
            }
            log.info(
              {
                address: config.temporal.address,
                namespace: config.temporal.namespace,
                taskQueue: config.temporal.taskQueue,
                warehouse: opened.description,
                metrics: metrics?.url ?? 'off',
                maxConcurrentActivities: settings.maxConcurrentActivities,
                taskQueueActivitiesPerSecond: settings.taskQueueActivitiesPerSecond ?? 'unlimited',
                ...alertsAtStart(config.alerts.webhookUrls, config.alerts.checkIntervalMs),
              },
              'worker started',
            );
            await worker.run().finally(() => monitor.stop());
            log.info('worker stopped');
          } finally {
            await connection.close();
            await closeBudget();
          }
        } finally {
          await metrics?.close();
          await opened.close();
        }
      },
    );
}

/** The settings `worker --help` lists after its options: the tuning the worker reads, and when. */
function workerHelp(): string {
  const width = Math.max(...WORKER_SETTINGS_HELP.map((s) => s.name.length));
  return (
    '\nWorker settings (environment or .env, read at start), besides the shared ones in the README:\n' +
    WORKER_SETTINGS_HELP.map((s) => `  ${s.name.padEnd(width)}  ${s.what} (default ${s.def})`).join('\n') +
    '\n\nThe worker reads its settings when it starts: restart it after changing one. The exception is\n' +
    `the alert thresholds (${STORED_ALERT_SETTINGS.join(', ')}): every check\n` +
    "judges by the deployment's stored ones, which `crs-sync alerts settings --store` changes for every\n" +
    'worker from its next check, without a restart (a worker whose own value differs warns once).\n' +
    '\nAlerts: every worker checks the alert conditions every CRS_ALERT_CHECK_INTERVAL and posts to\n' +
    'CRS_ALERT_WEBHOOK_URL (docs/alerts.md); the start-up log line names the receivers.\n' +
    "\nSecrets given as files (NAME_FILE, crs-sync --help): the service's credentials (CRS_ACCESS_TOKEN_FILE,\n" +
    'CRS_SERVICE_ACCOUNT_TOKEN_FILE, CRS_CLIENT_SECRET_FILE, CRS_API_KEY_FILE) are read again when the service\n' +
    'refuses one, so a file rotated on disk needs no restart; the others are read at start.\n'
  );
}

/** The settings every alert check takes from the warehouse, not from the worker's configuration. */
const STORED_ALERT_SETTINGS = Object.values(JUDGED_SETTING_NAMES);

/**
 * What the start-up log says of alerts: each receiver by scheme and host only (a webhook's path
 * is its secret), how often they are checked, and which settings a restart changes.
 */
function alertsAtStart(urls: readonly string[], checkIntervalMs: number): Record<string, unknown> {
  return {
    alertReceivers:
      urls.length > 0
        ? urls.map(describeTarget)
        : 'none (CRS_ALERT_WEBHOOK_URL unset): incidents are recorded, not sent',
    alertCheckEverySeconds: Math.round(checkIntervalMs / 1000),
    alertSettings:
      'receivers, CRS_ALERT_CHECK_INTERVAL and CRS_ALERT_TIMEOUT read at start (restart the worker after ' +
      `changing one); the thresholds (${STORED_ALERT_SETTINGS.join(', ')}) are the deployment's stored ` +
      'ones: crs-sync alerts settings --store',
  };
}

/** Seconds a scrape's warehouse queries may take; a scrape past it goes without those gauges. */
const GAUGE_STATEMENT_MS = 2_000;

/**
 * The worker's /metrics, with the warehouse gauges read on a connection of their own (the
 * loads hold the pool's) under a short statement timeout. Never fails the worker.
 */
async function startMetrics(
  opened: OpenedWarehouse,
  settings: WorkerSettings,
  sdkAddress: string | undefined,
  log: Logger,
  freshnessSlaSeconds: number,
  openDayStaleAfterSeconds: number,
): Promise<{ url: string; close(): Promise<void> } | undefined> {
  if (!settings.metrics) return undefined;
  const options = opened.warehouse.options;
  const gauges = openWarehouse({
    ...options,
    max: 1,
    applicationName: 'crs-sync metrics',
    timeouts: { ...options.timeouts, statementMs: GAUGE_STATEMENT_MS, lockMs: GAUGE_STATEMENT_MS },
  });
  let lastWarned = 0;
  setWarehouseReader(() => readWarehouseGauges(gauges.db), {
    onError: (err) => {
      // A scrape every few seconds against a warehouse that is down: one line a minute is enough.
      if (Date.now() - lastWarned < 60_000) return;
      lastWarned = Date.now();
      log.warn(
        { error: errorMessage(err) },
        'metrics: the warehouse gauges could not be read; scrapes go without them',
      );
    },
  });
  setOpenDayStaleAfter(openDayStaleAfterSeconds);
  // The same freshness rule as status and the alerts (the deployment's stored SLA, this
  // configuration's before any check stored one), and the drifts `schema changes` lists.
  setFreshnessReader(async () => {
    const f = await readFreshness(gauges.db, await deploymentFreshnessSla(gauges.db, freshnessSlaSeconds));
    return (['export', 'enrichment'] as const).map((source) => ({
      source,
      state: f[source].state,
      ageSeconds: f[source].age_seconds,
    }));
  });
  setSchemaDriftReader(async () => {
    const counts = new Map<string, SchemaDriftCount>();
    for (const d of await listSchemaDrift(queryable(gauges.db))) {
      const key = `${d.source}\u0000${d.kind}`;
      const c = counts.get(key) ?? { source: d.source, drift: d.kind, drifts: 0, open: 0 };
      c.drifts += 1;
      if (d.acceptedAt === null) c.open += 1;
      counts.set(key, c);
    }
    return [...counts.values()];
  });
  const unlisten = onAlertSent((e) => {
    if (isAlertKind(e.kind)) countAlertSent(e.kind, e.state);
  });
  const forget = () => {
    setWarehouseReader(undefined);
    setFreshnessReader(undefined);
    setSchemaDriftReader(undefined);
    unlisten();
  };
  const server = await serveMetrics({
    host: settings.metrics.host,
    port: settings.metrics.port,
    spare: METRICS_SPARE_PORTS,
    sdkAddress,
    log,
  });
  if (!server) {
    forget();
    await gauges.close();
    return undefined;
  }
  return {
    url: server.url,
    close: async () => {
      await server.close();
      forget();
      await gauges.close();
    },
  };
}

const isAlertKind = (k: string): k is AlertKind => (ALERT_KINDS as readonly string[]).includes(k);
