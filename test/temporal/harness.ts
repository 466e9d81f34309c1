import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { MockActivityEnvironment } from '@temporalio/testing';
import {
  bundleWorkflowCode,
  NativeConnection,
  Runtime,
  Worker,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { type ActivityDeps, createActivities } from '../../activities/index.ts';
import type { Activities } from '../../contract/activities.ts';
import { createServiceClient, type ServiceClient } from '../../src/api/index.ts';
import { parseConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { pinoSdkLogger } from '../../src/temporal/sdk-logger.ts';
import { workflowsPath } from '../../src/temporal/worker.ts';
import type { Warehouse } from '../../src/warehouse/db.ts';
import { provided } from '../helpers/tier.ts';

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

/** The workflow bundle, built once per test file (about a second and a half). */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({ workflowsPath, logger: quietLogger });
  return bundle;
}

export const quietLogger = {
  log: () => {},
  trace: () => {},
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
};

export interface TemporalHarness {
  client: Client;
  connection: Connection;
  nativeConnection: NativeConnection;
  address: string;
  namespace: string;
  /** A task queue of this test's own, so tests never pick up each other's tasks. */
  taskQueue: string;
  close(): Promise<void>;
}

/** `namespace`: one of TEST_NAMESPACES (test/setup/temporal.ts), a different one per test file. */
export async function connectHarness(namespace: string): Promise<TemporalHarness> {
  installQuietRuntime();
  const address = provided('temporalAddress');
  const connection = await Connection.connect({ address });
  const nativeConnection = await NativeConnection.connect({ address });
  return {
    client: new Client({ connection, namespace }),
    connection,
    nativeConnection,
    address,
    namespace,
    taskQueue: `test-${randomBytes(4).toString('hex')}`,
    close: async () => {
      await nativeConnection.close();
      await connection.close();
    },
  };
}

export const testLog = createLogger({ level: 'silent', destination: process.stderr });

/**
 * A worker on the test's task queue with the real activities, or with some of them replaced by
 * fakes (`activities`): the worker registers those in their place, as it would any activity.
 */
export async function createTestWorker(
  h: TemporalHarness,
  deps: {
    warehouse: Warehouse;
    activities?: Partial<Activities>;
    env?: Record<string, string>;
    client?: ServiceClient;
  },
): Promise<Worker> {
  // The test pools hold 10 connections: two day loads of two connections each, and the rest. A cut
  // or refused export is reopened after 20 ms, 40 ms, ... (CRS_SOURCE_REOPEN_PAUSE), not 250 ms
  // doubling: the same five reopens, without waiting 7.75 s for each attempt that gives up.
  const config = parseConfig({
    CRS_SCHEMA: deps.warehouse.schema,
    CRS_LOAD_PARTITIONS: '2',
    CRS_ENRICH_CONCURRENCY: '2',
    CRS_SOURCE_REOPEN_PAUSE: '20ms',
    ...(deps.env ?? {}),
  });
  const activityDeps: ActivityDeps = {
    warehouse: deps.warehouse,
    client:
      deps.client ?? createServiceClient({ ...config.api, concurrency: config.enrichConcurrency }, testLog),
    config,
    log: testLog,
    maxDayLoads: 2,
  };
  return Worker.create({
    connection: h.nativeConnection,
    namespace: h.namespace,
    taskQueue: h.taskQueue,
    workflowBundle: await workflowBundle(),
    activities: { ...createActivities(activityDeps), ...deps.activities },
    // A test ends by shutting the worker down; in-flight activities get no grace.
    shutdownGraceTime: '1s',
  });
}

/** Runs one activity in a mock activity environment, typed by the activity (the SDK's `run` is not). */
export function runActivity<I, R>(
  env: MockActivityEnvironment,
  activity: (input: I) => Promise<R>,
  input: I,
) {
  return env.run(activity, input) as Promise<R>;
}

let runtimeInstalled = false;

/** The SDK's own logs, quiet in tests (one runtime per test process). */
export function installQuietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  Runtime.install({ logger: pinoSdkLogger(createLogger({ level: 'error', destination: process.stderr })) });
}
