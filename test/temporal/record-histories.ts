/**
 * Records the histories that test/temporal/replay.test.ts replays, on a dev server of its own,
 * with instant stand-in activities (the histories hold what the workflows decided, not what the
 * activities did):
 *   sync      a manual sync with enrichment: syncWindow, one of its syncDay children, enrichPending
 *   backfill  a backfill that continues as new twice: backfill-run-1..3
 *   schedule  a run started by a Temporal Schedule: scheduled-syncWindow
 *   cancel    a backfill cancelled while a day loads: cancelled-backfill and its cancelled-syncDay
 *   intraday  an intraday run after 00:30 UTC, with enrichment: syncIntraday (the closed day, then
 *             the open day as a partial day) and the open day's partial intraday-syncDay
 *
 * `node test/temporal/record-histories.ts [sync] [backfill] [schedule] [cancel] [intraday]` records the
 * groups named (all without arguments) and overwrites their files. Histories of an earlier
 * release are what make the replay test worth having: record a group again only when a workflow
 * change is meant to be incompatible with running executions (see the README, "Deploying a new
 * release"); a replay that fails otherwise means the change needs `patched()`.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Context } from '@temporalio/activity';
import { WorkflowFailedError } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Runtime, Worker } from '@temporalio/worker';
import { ensureTemporalCli } from '../../src/temporal/cli-binary.ts';
import { createOrUpdateSchedule } from '../../src/temporal/schedules.ts';
import { workflowsPath } from '../../src/temporal/worker.ts';
import { backfill, syncIntraday, syncWindow } from '../../workflows/index.ts';

const GROUPS = ['sync', 'backfill', 'schedule', 'cancel', 'intraday'] as const;
type Group = (typeof GROUPS)[number];
const asked = process.argv.slice(2);
for (const a of asked) {
  if (!(GROUPS as readonly string[]).includes(a)) {
    process.stderr.write(`unknown group ${a}; groups: ${GROUPS.join(', ')}\n`);
    process.exit(2);
  }
}
const groups = new Set<Group>(asked.length ? (asked as Group[]) : GROUPS);

const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
const out = path.join(import.meta.dirname, 'fixtures', 'histories');
const run = promisify(execFile);
const TASK_QUEUE = 'record';
/** Days of the cancelled backfill: a load of one of these waits until it is cancelled. */
const BLOCKED_MONTH = '2024-03-';

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
      from: i.from ?? '2024-01-01',
      to: i.to ?? '2024-01-03',
      days: ['2024-01-01', '2024-01-02', '2024-01-03'],
      enrichConcurrency: 2,
    };
  },
  async dayLoadedSince() {
    return null;
  },
  async loadExportDay(i: { day: string }) {
    if (!i.day.startsWith(BLOCKED_MONTH)) return counts;
    // Heartbeats carry the cancellation to the activity; it ends when the run is cancelled.
    const ctx = Context.current();
    const beat = setInterval(() => ctx.heartbeat(), 200);
    try {
      await ctx.cancelled;
    } finally {
      clearInterval(beat);
    }
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
    return pages % 2 === 1
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
  taskQueue: TASK_QUEUE,
  workflowBundle: await bundleWorkflowCode({ workflowsPath, logger: quiet }),
  activities,
});
/** Workflow id (and run id, when the id has several runs) → fixture name. */
const wanted: { workflowId: string; runId?: string; name: string }[] = [];
const client = env.client;

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

await worker.runUntil(async () => {
  if (groups.has('sync')) {
    await client.workflow.execute(syncWindow, {
      taskQueue: TASK_QUEUE,
      workflowId: 'sync-window',
      args: [{ kind: 'manual', from: '2024-01-01', to: '2024-01-03', enrich: true }],
    });
    wanted.push(
      { workflowId: 'sync-window', name: 'syncWindow' },
      { workflowId: 'crs-sync-day-2024-01-02', name: 'syncDay' },
      { workflowId: 'crs-sync-enrich', name: 'enrichPending' },
    );
  }
  if (groups.has('backfill')) {
    await client.workflow.execute(backfill, {
      taskQueue: TASK_QUEUE,
      workflowId: 'backfill',
      args: [{ from: '2024-02-01', to: '2024-02-05', concurrency: 2, daysPerRun: 2, enrich: false }],
    });
    const runs: string[] = [];
    for await (const e of client.workflow.list({ query: `WorkflowId = 'backfill'` })) runs.push(e.runId);
    // The list is newest first; run 1 is the one started by the client.
    runs.reverse().forEach((runId, i) => {
      wanted.push({ workflowId: 'backfill', runId, name: `backfill-run-${i + 1}` });
    });
  }
  if (groups.has('schedule')) {
    // The real schedule definition (crs-sync schedule create), under an id of its own, triggered
    // once: the run it starts carries the schedule's search attributes and its `scheduled` input.
    const scheduleId = 'record-schedule';
    await createOrUpdateSchedule(client, { taskQueue: TASK_QUEUE, id: scheduleId });
    const handle = client.schedule.getHandle(scheduleId);
    await handle.trigger();
    let started: { workflowId: string; firstExecutionRunId: string } | undefined;
    for (let i = 0; i < 300 && !started; i++) {
      started = (await handle.describe()).info.recentActions[0]?.action.workflow;
      if (!started) await sleep(100);
    }
    if (!started) throw new Error('the schedule started no run');
    await client.workflow.getHandle(started.workflowId, started.firstExecutionRunId).result();
    await handle.delete();
    wanted.push({
      workflowId: started.workflowId,
      runId: started.firstExecutionRunId,
      name: 'scheduled-syncWindow',
    });
  }
  if (groups.has('cancel')) {
    const handle = await client.workflow.start(backfill, {
      taskQueue: TASK_QUEUE,
      workflowId: 'cancelled-backfill',
      args: [{ from: '2024-03-01', to: '2024-03-04', concurrency: 2, enrich: true }],
    });
    // Cancel once both lanes are loading a day (each load waits for its cancellation).
    const day = client.workflow.getHandle('crs-sync-day-2024-03-02');
    for (let i = 0; i < 300; i++) {
      const pending = await day.describe().then(
        (d) => d.raw.pendingActivities?.length ?? 0,
        () => 0,
      );
      if (pending > 0) break;
      await sleep(100);
    }
    await handle.cancel();
    const ended = await handle.result().then(
      () => 'completed',
      (err: unknown) => (err instanceof WorkflowFailedError ? 'cancelled' : String(err)),
    );
    if (ended !== 'cancelled') throw new Error(`the cancelled backfill ended ${ended}`);
    wanted.push(
      { workflowId: 'cancelled-backfill', name: 'cancelled-backfill' },
      { workflowId: 'crs-sync-day-2024-03-02', name: 'cancelled-syncDay' },
    );
  }
  if (groups.has('intraday')) {
    // A fixed instant after 00:30 UTC, so every recording takes both steps: the day that just
    // closed as a complete day, then the open day as a partial one (a schedule's run acts as of
    // its scheduled time, which would make the steps depend on when the recording ran).
    await client.workflow.execute(syncIntraday, {
      taskQueue: TASK_QUEUE,
      workflowId: 'crs-sync-intraday',
      args: [{ enrich: true, now: '2024-04-02T10:00:00Z' }],
    });
    wanted.push(
      { workflowId: 'crs-sync-intraday', name: 'syncIntraday' },
      { workflowId: 'crs-sync-day-2024-04-02', name: 'intraday-syncDay' },
    );
  }
});
for (const w of wanted) {
  const args = ['workflow', 'show', '--workflow-id', w.workflowId, ...(w.runId ? ['--run-id', w.runId] : [])];
  const { stdout } = await run(cli, [...args, '--output', 'json', '--address', env.address], {
    maxBuffer: 64 << 20,
  });
  writeFileSync(path.join(out, `${w.name}.json`), stdout);
  process.stdout.write(`recorded ${w.name}\n`);
}
await env.teardown();
