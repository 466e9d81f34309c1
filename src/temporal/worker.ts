import path from 'node:path';
import { type NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import type { Activities } from '../../contract/activities.ts';
import type { Logger } from '../log.ts';
import { pinoSdkLogger } from './sdk-logger.ts';
import type { WorkerSettings } from './worker-settings.ts';

export const workflowsPath = path.resolve(import.meta.dirname, '..', '..', 'workflows', 'index.ts');

/**
 * Installs the SDK runtime for this process: its logs through pino (native core logs forwarded
 * at WARN and above) and, when an address is given, a Prometheus /metrics endpoint. The runtime
 * can be installed once per process, before any connection. The runtime also owns the graceful
 * drain: on SIGINT/SIGTERM it stops polling, lets running activities finish within the worker's
 * shutdown grace time, and `worker.run()` then resolves.
 */
export function installRuntime(log: Logger, metricsAddress: string | undefined): void {
  Runtime.install({
    logger: pinoSdkLogger(log),
    telemetryOptions: {
      logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} },
      ...(metricsAddress ? { metrics: { prometheus: { bindAddress: metricsAddress } } } : {}),
    },
  });
}

export interface SyncWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: Activities;
  settings: WorkerSettings;
  /** A prebuilt bundle (tests build it once); by default the worker bundles workflows/. */
  workflowBundle?: WorkerOptions['workflowBundle'];
}

export async function createSyncWorker(o: SyncWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: o.connection,
    namespace: o.namespace,
    taskQueue: o.taskQueue,
    activities: o.activities,
    ...(o.workflowBundle ? { workflowBundle: o.workflowBundle } : { workflowsPath }),
    maxConcurrentActivityTaskExecutions: o.settings.maxConcurrentActivities,
    maxConcurrentWorkflowTaskExecutions: o.settings.maxConcurrentWorkflowTasks,
    ...(o.settings.taskQueueActivitiesPerSecond
      ? { maxTaskQueueActivitiesPerSecond: o.settings.taskQueueActivitiesPerSecond }
      : {}),
    shutdownGraceTime: o.settings.shutdownGraceTime as `${number}s`,
  });
}
