/**
 * Records the histories that test/temporal/replay.test.ts replays: a sync with enrichment and a
 * backfill that continues as new, on a dev server of its own, with instant stand-in activities.
 * Run it again (node test/temporal/record-histories.ts) only when a workflow change is meant to
 * be incompatible with running executions; otherwise a failing replay means the change needs
 * `patched()`.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Runtime, Worker } from '@temporalio/worker';
import { ensureTemporalCli } from '../../src/temporal/cli-binary.ts';
import { workflowsPath } from '../../src/temporal/worker.ts';
import { backfill, syncWindow } from '../../workflows/index.ts';

const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
const out = path.join(import.meta.dirname, 'fixtures', 'histories');
const run = promisify(execFile);

Runtime.install({ logger: quiet });
const cli = await ensureTemporalCli();
if (!cli) throw new Error('no Temporal CLI (see scripts/ensure-temporal-cli.ts)');
const env = await TestWorkflowEnvironment.createLocal({
  server: { executable: { type: 'existing-path', path: cli }, ip: '127.0.0.1' },
});
const counts = {
  linesRead: 10,
  bytesRead: 1000,
  rowsRead: 10,
  inserted: 10,
  updated: 0,
  unchanged: 0,
  rejected: 0,
  deleted: 0,
  threadsQueued: 2,
};
let pages = 0;
const activities = {
  async planSyncWindow(i: { from?: string; to?: string }) {
    return {
      from: i.from!,
      to: i.to!,
      days: ['2024-01-01', '2024-01-02', '2024-01-03'],
      enrichConcurrency: 2,
    };
  },
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
    return { enrichConcurrency: 2 };
  },
  async listPendingThreads() {
    pages += 1;
    return pages === 1
      ? ['00000000-0000-4000-a000-000000000001', '00000000-0000-4000-a000-000000000002']
      : [];
  },
  async enrichThreads(i: { threadIds: string[] }) {
    const n = i.threadIds.length;
    return { threads: n, done: n, deleted: 0, forbidden: 0, failed: 0, messages: 3 * n, artifacts: n };
  },
};
const worker = await Worker.create({
  connection: env.nativeConnection,
  taskQueue: 'record',
  workflowBundle: await bundleWorkflowCode({ workflowsPath, logger: quiet }),
  activities,
});
await worker.runUntil(async () => {
  await env.client.workflow.execute(syncWindow, {
    taskQueue: 'record',
    workflowId: 'sync-window',
    args: [{ kind: 'manual', from: '2024-01-01', to: '2024-01-03', enrich: true }],
  });
  await env.client.workflow.execute(backfill, {
    taskQueue: 'record',
    workflowId: 'backfill',
    args: [{ from: '2024-02-01', to: '2024-02-05', concurrency: 2, daysPerRun: 2, enrich: false }],
  });
});
const wanted: { id: string; name: string }[] = [
  { id: 'sync-window', name: 'syncWindow' },
  { id: 'crs-sync-day-2024-01-02', name: 'syncDay' },
  { id: 'crs-sync-enrich', name: 'enrichPending' },
];
let n = 0;
for await (const e of env.client.workflow.list({ query: `WorkflowId = 'backfill'` })) {
  wanted.push({ id: `backfill --run-id ${e.runId}`, name: `backfill-run-${++n}` });
}
for (const w of wanted) {
  const [id, ...rest] = w.id.split(' ');
  const args = ['workflow', 'show', '--workflow-id', id!, ...rest, '--output', 'json'];
  const { stdout } = await run(cli, [...args, '--address', env.address], { maxBuffer: 64 << 20 });
  writeFileSync(path.join(out, `${w.name}.json`), stdout);
  process.stdout.write(`recorded ${w.name}\n`);
}
await env.teardown();
