import type { Client } from '@temporalio/client';

/**
 * Whether any worker polls a task queue: what a run started from the CLI needs to move at all.
 * Temporal accepts a workflow on a task queue nobody polls and keeps it waiting, silently; the
 * commands that start or trigger runs ask first and say so.
 */

// temporal.api.enums.v1: TASK_QUEUE_KIND_NORMAL, TASK_QUEUE_TYPE_WORKFLOW (the proto package is
// not a dependency of ours; the numbers are the wire protocol's).
const KIND_NORMAL = 1;
const TYPE_WORKFLOW = 1;

/**
 * The server lists a poller for minutes after its last poll; a live worker polls again at least
 * every ~70 s (a long poll's timeout), so a poller older than this is a worker that has gone.
 */
export const POLLER_FRESH_MS = 3 * 60_000;

interface Stamp {
  seconds?: number | { toNumber(): number } | null;
  nanos?: number | null;
}

function msOf(t: Stamp | null | undefined): number | undefined {
  if (!t || t.seconds === undefined || t.seconds === null) return undefined;
  const s = typeof t.seconds === 'number' ? t.seconds : t.seconds.toNumber();
  return s * 1000 + Math.floor((t.nanos ?? 0) / 1e6);
}

/**
 * How many workers polled `taskQueue`'s workflow tasks within POLLER_FRESH_MS of `now` (a poller
 * without a time counts: the server saw it).
 */
export async function workersPolling(client: Client, taskQueue: string, now = Date.now()): Promise<number> {
  const r = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue, kind: KIND_NORMAL },
    taskQueueType: TYPE_WORKFLOW,
  });
  return (r.pollers ?? []).filter((p) => {
    const at = msOf(p.lastAccessTime as Stamp | null | undefined);
    return at === undefined || now - at <= POLLER_FRESH_MS;
  }).length;
}

/** What the commands say when nobody polls: where the run waits, and what moves it. */
export function noWorkerWarning(taskQueue: string, namespace: string, what: string): string {
  return (
    `crs-sync: no worker is polling task queue ${taskQueue} (namespace ${namespace}): ${what} waits ` +
    'until one starts (crs-sync worker, with the same TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and TEMPORAL_TASK_QUEUE)\n'
  );
}

/**
 * Checks for a worker now and, while none polls, again every `everyMs`, writing to `err` each
 * time it finds none (and once when one turns up after that). Never fails the command: a check
 * that cannot be made says nothing. `stop()` ends the checks.
 */
export function watchWorkers(
  client: Client,
  taskQueue: string,
  what: string,
  err: NodeJS.WritableStream,
  everyMs = 30_000,
): { first: Promise<number | undefined>; stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let warned = false;
  const check = async (): Promise<number | undefined> => {
    let n: number;
    try {
      n = await workersPolling(client, taskQueue);
    } catch {
      return undefined;
    }
    if (stopped) return n;
    if (n === 0) {
      err.write(noWorkerWarning(taskQueue, client.options.namespace, what));
      warned = true;
      timer = setTimeout(() => void check(), everyMs);
      timer.unref();
    } else if (warned) {
      err.write(`crs-sync: a worker is polling task queue ${taskQueue} now\n`);
    }
    return n;
  };
  return {
    first: check(),
    stop: () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
