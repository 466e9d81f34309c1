import { once } from 'node:events';
import { type AddressInfo, createServer } from 'node:net';
import path from 'node:path';
import { type NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import type { Activities } from '../../contract/activities.ts';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../log.ts';
import { pinoSdkLogger } from './sdk-logger.ts';
import type { WorkerSettings } from './worker-settings.ts';

export const workflowsPath = path.resolve(import.meta.dirname, '..', '..', 'workflows', 'index.ts');

/**
 * Installs the SDK runtime for this process: its logs through pino (native core logs forwarded
 * at WARN and above) and, with `sdkMetrics`, the SDK's Prometheus exporter on a free loopback
 * port, whose exposition the worker's own /metrics appends (src/metrics/server.ts); the answer
 * is that address. The runtime can be installed once per process, before any connection; a
 * failed install leaves none, so another port can be tried. The runtime also owns the graceful
 * drain: on SIGINT/SIGTERM it stops polling, lets running activities finish within the worker's
 * shutdown grace time, and `worker.run()` then resolves.
 */
export async function installRuntime(log: Logger, sdkMetrics: boolean): Promise<string | undefined> {
  const install = (bindAddress?: string) =>
    Runtime.install({
      logger: pinoSdkLogger(log),
      telemetryOptions: {
        logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} },
        ...(bindAddress ? { metrics: { prometheus: { bindAddress } } } : {}),
      },
    });
  if (sdkMetrics) {
    let lastError: unknown;
    // A free port can be taken by another process between the probe and the SDK's bind.
    for (let attempt = 0; attempt < 3; attempt++) {
      const address = `127.0.0.1:${await freeLoopbackPort()}`;
      try {
        install(address);
        return address;
      } catch (err) {
        if (!/metrics exporter/i.test(errorMessage(err))) throw err;
        lastError = err;
      }
    }
    log.warn(
      { error: errorMessage(lastError) },
      "metrics: the Temporal SDK's exporter could not bind a loopback port; /metrics carries the pipeline's series only",
    );
  }
  install();
  return undefined;
}

async function freeLoopbackPort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
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
