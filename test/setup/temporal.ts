import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { TestProject } from 'vitest/node';
import { ensureTemporalCli } from '../../src/temporal/cli-binary.ts';

/**
 * One Temporal dev server for the whole test run (the Temporal CLI's `server start-dev`, SQLite
 * in memory), found through TEMPORAL_CLI_PATH, PATH or the project's pinned install; the SDK's
 * own download is the last resort. Tests connect to `inject('temporalAddress')` and use a task
 * queue of their own.
 */
declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    temporalNamespace: string;
  }
}

/**
 * Day workflow ids (`crs-sync-day-YYYY-MM-DD`) are unique per namespace, and test files run in
 * parallel against real dates; each file that starts workflows takes a namespace of its own.
 */
export const TEST_NAMESPACES = [
  'default',
  'workflows',
  'integration',
  'kill',
  'schedules',
  'cli',
  'liveness',
  'churn',
  'metrics',
  'intraday',
  'retries',
  'operator',
  'compare',
];

export const SUGGEST_CONTINUE_AS_NEW_AFTER = 30;

let env: TestWorkflowEnvironment | undefined;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const path = await ensureTemporalCli((m) => process.stderr.write(`${m}\n`));
  env = await TestWorkflowEnvironment.createLocal({
    server: {
      ...(path ? { executable: { type: 'existing-path' as const, path } } : {}),
      ip: '127.0.0.1',
      namespace: 'default',
      extraArgs: [
        ...TEST_NAMESPACES.slice(1).flatMap((n) => ['--namespace', n]),
        // The server suggests continue-as-new after this many history events (default 4k in
        // production servers): low here, so a short backfill in a test is told to continue as new.
        '--dynamic-config-value',
        `limit.historyCount.suggestContinueAsNew=${SUGGEST_CONTINUE_AS_NEW_AFTER}`,
      ],
    },
  });
  project.provide('temporalAddress', env.address);
  project.provide('temporalNamespace', 'default');
  return async () => {
    await env?.teardown();
  };
}
