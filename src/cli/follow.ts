import type { Client, WorkflowHandle } from '@temporalio/client';
import cliProgress from 'cli-progress';
import { runIdOf } from '../../contract/run-id.ts';
import type { SyncProgress, SyncResult } from '../../contract/workflows.ts';
import type { backfill, syncWindow } from '../../workflows/index.ts';
import { CrsError } from '../errors.ts';
import { connectClient } from '../temporal/connection.ts';
import { watchWorkers } from '../temporal/pollers.ts';
import { followRun } from '../temporal/runs.ts';
import { loadContext } from './context.ts';

type RunHandle = WorkflowHandle<typeof syncWindow> | WorkflowHandle<typeof backfill>;

/** How often an attached run says again that no worker polls its task queue. */
const NO_WORKER_REPEAT_MS = 30_000;

/**
 * What `sync` and `backfill` do once their options are checked: connect to Temporal, start (or
 * attach to) the run, say so on stderr (`<label> <workflow id> on task queue <queue>`), then
 * either print the workflow id and return (`--detach`) or follow the run to its end. When no
 * worker polls the task queue, stderr says so at once, and every 30 s while the run waits.
 */
export async function startAndFollow(
  label: string,
  detach: boolean,
  start: (client: Client, taskQueue: string) => Promise<RunHandle>,
): Promise<void> {
  const ctx = loadContext();
  const taskQueue = ctx.config.temporal.taskQueue;
  const t = await connectClient(ctx.config.temporal);
  try {
    const handle = await start(t.client, taskQueue);
    process.stderr.write(`${label} ${handle.workflowId} on task queue ${taskQueue}\n`);
    const watch = watchWorkers(t.client, taskQueue, handle.workflowId, process.stderr, NO_WORKER_REPEAT_MS);
    if (detach) {
      await watch.first;
      watch.stop();
      process.stdout.write(`${handle.workflowId}\n`);
      return;
    }
    try {
      await followWithProgress(t.client, handle);
    } finally {
      watch.stop();
    }
  } finally {
    await t.close();
  }
}

/** How to cancel a run that goes on without us: a command of ours, and what it needs. */
export function cancelHint(workflowId: string): string {
  return `cancel it with: crs-sync cancel ${workflowId} (a worker must be running to carry the cancellation out)`;
}

/**
 * The terminal side of `sync` and `backfill`: a progress bar on stderr while the run goes (plain
 * lines when stderr is not a terminal), then a summary on stdout. Ctrl-C stops following; the
 * run itself goes on in the workers.
 */
export async function followWithProgress(
  client: Client,
  handle: RunHandle,
  out: NodeJS.WritableStream = process.stdout,
  err: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
): Promise<SyncResult> {
  const tty = err.isTTY === true;
  const bar = tty
    ? new cliProgress.SingleBar(
        {
          stream: err,
          format: '{kind} |{bar}| {value}/{total} days | {rows} rows | {phase} {running}',
          hideCursor: true,
          clearOnComplete: false,
        },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  let started = false;
  let lastLine = '';
  const onProgress = (p: SyncProgress) => {
    const payload = {
      kind: p.kind,
      rows: p.totals.rowsRead,
      phase: p.phase,
      running: p.daysRunning.slice(0, 4).join(' '),
    };
    if (bar) {
      if (!started) bar.start(Math.max(p.daysTotal, 1), p.daysDone, payload);
      started = true;
      bar.setTotal(Math.max(p.daysTotal, 1));
      bar.update(p.daysDone, payload);
      return;
    }
    const line = `${p.kind}: ${p.phase}, ${p.daysDone}/${p.daysTotal} days, ${p.totals.rowsRead} rows`;
    if (line !== lastLine) err.write(`${line}\n`);
    lastLine = line;
  };
  // Ctrl-C also cuts the calls in flight: a progress query waits up to its timeout for a worker
  // to answer, and would hold the process that long after it said it stopped.
  const calls = new AbortController();
  const interrupted = new Promise<never>((_, reject) => {
    process.once('SIGINT', () => {
      reject(
        new CrsError(
          'CANCELLED',
          `stopped following ${handle.workflowId}; it goes on in the workers (${cancelHint(handle.workflowId)})`,
        ),
      );
      calls.abort();
    });
  });
  try {
    const following = client.connection.withAbortSignal(calls.signal, () =>
      followRun(client, handle, { onProgress, signal: calls.signal }),
    );
    const result = await Promise.race([following, interrupted]);
    bar?.stop();
    out.write(`${formatSummary(handle.workflowId, result).join('\n')}\n`);
    return result;
  } catch (e) {
    bar?.stop();
    throw e;
  }
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

export function formatSummary(workflowId: string, r: SyncResult): string[] {
  const t = r.totals;
  const lines = [
    `${r.kind} ${workflowId} succeeded: ${r.from ?? '-'} → ${r.to ?? '-'}, ${r.days} day(s) ` +
      `(${t.daysLoaded} loaded, ${t.daysAttached} taken from another run, ${t.daysFailed} failed)`,
    `rows: ${t.rowsRead} read, ${t.inserted} inserted, ${t.updated} updated, ${t.unchanged} unchanged, ` +
      `${t.rejected} rejected, ${t.deleted} marked deleted; ${mb(t.bytesRead)}` +
      (t.daysAttached > 0 ? ` (the ${t.daysAttached} day(s) taken from another run count in that run)` : ''),
    // Each day's load queues the threads with new messages that day: a thread with messages on
    // several days is queued by each of them, and enriched once.
    `enrichment queue: ${t.threadsQueued} thread-day(s) queued (a thread with new messages on several days counts once per day)`,
    // A run an earlier release finished carries its run id as `loadId` (contract/run-id.ts). The
    // line keeps its words: status's runs table names the same id "load id" (sync_runs.load_id).
    `load id: ${runIdOf(r)}`,
  ];
  if (r.enrich) {
    const e = r.enrich;
    lines.push(
      `threads: ${e.threads} enriched (${e.done} done, ${e.deleted} deleted, ${e.forbidden} forbidden, ${e.failed} failed); ` +
        `${e.messages} messages, ${e.artifacts} artifacts`,
    );
  }
  return lines;
}
