import type { Command } from 'commander';
import { createActivities, DEFAULT_MAX_DAY_LOADS } from '../../../activities/index.ts';
import { createDeploymentClient } from '../../api/deployment-client.ts';
import { requireSettings } from '../../config.ts';
import { CrsError, errorMessage } from '../../errors.ts';
import { connectWorker } from '../../temporal/connection.ts';
import { createSyncWorker, installRuntime } from '../../temporal/worker.ts';
import { parseWorkerSettings } from '../../temporal/worker-settings.ts';
import {
  ALLOW_EMBEDDED_FLAG,
  loadContext,
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
        'finish (a load cut short resumes from its checkpoint elsewhere). Prometheus metrics on ' +
        'TEMPORAL_METRICS_ADDRESS (/metrics). Without DATABASE_URL it refuses to start (exit 2) ' +
        `unless ${ALLOW_EMBEDDED_FLAG} or CRS_ALLOW_EMBEDDED=1.`,
    )
    .option(
      ALLOW_EMBEDDED_FLAG,
      'run on the embedded PostgreSQL in .data/postgres when DATABASE_URL is not set (a local worker)',
    )
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
        try {
          installRuntime(log, settings.metricsAddress);
        } catch (err) {
          if (settings.metricsAddress && /metrics exporter/i.test(errorMessage(err))) {
            throw new CrsError(
              'USAGE',
              `cannot serve metrics on TEMPORAL_METRICS_ADDRESS ${settings.metricsAddress} (${errorMessage(err)}); ` +
                'set it to a free address, or to nothing to turn metrics off',
            );
          }
          throw err;
        }
        // Day loads hold their connections throughout; enrichment batches and bookkeeping need a few more.
        const opened = await openConfiguredWarehouse(ctx, {
          connections: dayLoads * config.loadConnections + config.enrichConcurrency,
        });
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
            for (const sig of ['SIGTERM', 'SIGINT'] as const) {
              process.once(sig, () => log.info({ signal: sig }, 'draining the worker'));
            }
            log.info(
              {
                address: config.temporal.address,
                namespace: config.temporal.namespace,
                taskQueue: config.temporal.taskQueue,
                warehouse: opened.description,
                metrics: settings.metricsAddress ? `http://${settings.metricsAddress}/metrics` : 'off',
                maxConcurrentActivities: settings.maxConcurrentActivities,
                taskQueueActivitiesPerSecond: settings.taskQueueActivitiesPerSecond ?? 'unlimited',
              },
              'worker started',
            );
            await worker.run();
            log.info('worker stopped');
          } finally {
            await connection.close();
            await closeBudget();
          }
        } finally {
          await opened.close();
        }
      },
    );
}
