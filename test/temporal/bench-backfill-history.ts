/**
 * Measures the history a three-year backfill leaves: 1096 days, 16 at a time, on a dev server of
 * its own, with the day load replaced by an instant stand-in (this measures orchestration only).
 * Prints runs (continue-as-new), events per run and seconds. Run: node test/temporal/bench-backfill-history.ts
 * Measured 2026-11-22: {"days":1096,"loaded":1096,"runs":11,"maxEvents":531,"minEvents":500,"seconds":45.42}
 */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Runtime, Worker } from '@temporalio/worker';
import { ensureTemporalCli } from '../../src/temporal/cli-binary.ts';
import { workflowsPath } from '../../src/temporal/worker.ts';
import { backfill } from '../../workflows/index.ts';

Runtime.install({ logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } });
const cli = await ensureTemporalCli();
if (!cli) throw new Error('no Temporal CLI (see scripts/ensure-temporal-cli.ts)');
const env = await TestWorkflowEnvironment.createLocal({
  server: { executable: { type: 'existing-path', path: cli }, ip: '127.0.0.1' },
});
const counts = {
  linesRead: 0,
  bytesRead: 0,
  rowsRead: 1,
  inserted: 1,
  updated: 0,
  unchanged: 0,
  rejected: 0,
  deleted: 0,
  threadsQueued: 0,
};
const activities = {
  async dayLoadedSince() {
    return null;
  },
  async loadExportDay() {
    return counts;
  },
  async beginRun() {},
  async endRun() {},
  async releaseDay() {
    return false;
  },
  async workerSettings() {
    return { enrichConcurrency: 1 };
  },
};
const bundle = await bundleWorkflowCode({
  workflowsPath,
  logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} },
});
const worker = await Worker.create({
  connection: env.nativeConnection,
  taskQueue: 'm',
  workflowBundle: bundle,
  activities,
  maxConcurrentWorkflowTaskExecutions: 100,
  maxConcurrentActivityTaskExecutions: 100,
});
const client = env.client;
const t0 = Date.now();
const result = await worker.runUntil(
  client.workflow.execute(backfill, {
    taskQueue: 'm',
    workflowId: 'bf3y',
    args: [{ from: '2023-01-01', to: '2025-12-31', concurrency: 16, enrich: false }],
  }),
);
const ms = Date.now() - t0;
const lengths: number[] = [];
for await (const e of client.workflow.list({ query: `WorkflowId = 'bf3y'` })) {
  const h = await client.workflow.getHandle('bf3y', e.runId).fetchHistory();
  lengths.push(h.events?.length ?? 0);
}
console.log(
  JSON.stringify({
    days: result.days,
    loaded: result.totals.daysLoaded,
    runs: lengths.length,
    maxEvents: Math.max(...lengths),
    minEvents: Math.min(...lengths),
    seconds: ms / 1000,
  }),
);
await env.teardown();
