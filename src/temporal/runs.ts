import {
  type Client,
  WorkflowFailedError,
  type WorkflowHandle,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
} from '@temporalio/client';
import { TerminatedFailure, TimeoutFailure } from '@temporalio/common';
import type { BackfillInput, SyncProgress, SyncResult, SyncWindowInput } from '../../contract/workflows.ts';
import { backfill, syncWindow } from '../../workflows/index.ts';
import { progressQuery } from '../../workflows/queries.ts';
import { CrsError } from '../errors.ts';

export function backfillWorkflowId(from: string, to: string): string {
  return `crs-sync-backfill-${from}-${to}`;
}

/**
 * Starts a manual sync. Its id carries the start time; day-level ids keep it from loading a day
 * that another run is loading.
 */
export async function startSync(
  client: Client,
  taskQueue: string,
  input: Omit<SyncWindowInput, 'kind'>,
  now = new Date(),
): Promise<WorkflowHandle<typeof syncWindow>> {
  return client.workflow.start(syncWindow, {
    taskQueue,
    workflowId: `crs-sync-manual-${now.toISOString().replace(/[:.]/g, '-')}`,
    args: [{ kind: 'manual', ...input }],
    staticSummary: `sync ${input.from ?? 'planned'} → ${input.to ?? 'yesterday'}`,
  });
}

/**
 * Starts a backfill, or attaches to the same backfill when it is already running (same range,
 * same id), so re-running the command follows the existing one instead of racing it.
 */
export async function startBackfill(
  client: Client,
  taskQueue: string,
  input: BackfillInput,
): Promise<WorkflowHandle<typeof backfill>> {
  return client.workflow.start(backfill, {
    taskQueue,
    workflowId: backfillWorkflowId(input.from, input.to),
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
    args: [input],
    staticSummary: `backfill ${input.from} → ${input.to}`,
  });
}

export interface FollowOptions {
  onProgress?: (p: SyncProgress) => void;
  intervalMs?: number;
  signal?: AbortSignal;
}

/**
 * Waits for a run's result (across continue-as-new), reporting its progress query as it goes.
 * A failed run becomes a CrsError with the workflow's own reason.
 */
export async function followRun(
  client: Client,
  handle: WorkflowHandle<typeof syncWindow> | WorkflowHandle<typeof backfill>,
  o: FollowOptions = {},
): Promise<SyncResult> {
  // Without a run id, queries reach the latest run of a workflow that continued as new.
  const latest = client.workflow.getHandle(handle.workflowId);
  let stopped = false;
  const poll = async () => {
    while (!stopped && !o.signal?.aborted) {
      try {
        o.onProgress?.(await latest.query(progressQuery));
      } catch {
        // Between runs (continue-as-new) or before the first workflow task: try again.
      }
      await new Promise((r) => setTimeout(r, o.intervalMs ?? 1000));
    }
  };
  const polling = poll();
  try {
    const result = (await handle.result()) as SyncResult;
    return result;
  } catch (err) {
    throw runFailure(handle.workflowId, err);
  } finally {
    stopped = true;
    await polling;
  }
}

export function runFailure(workflowId: string, err: unknown): CrsError {
  if (err instanceof WorkflowFailedError) {
    const c = err.cause;
    const reason =
      c instanceof TerminatedFailure
        ? 'terminated'
        : c instanceof TimeoutFailure
          ? 'timed out'
          : (c?.message ?? err.message);
    return new CrsError('LOAD_FAILED', `${workflowId} failed: ${reason}`, { cause: err });
  }
  return new CrsError('LOAD_FAILED', `${workflowId}: ${(err as Error).message ?? String(err)}`, {
    cause: err,
  });
}
