import { ApplicationFailure, CancellationScope, isCancellation } from '@temporalio/workflow';
import type { SyncProgress, SyncResult } from '../contract/workflows.ts';
import { ledger } from './policies.ts';
import { publish } from './run-state.ts';

export function resultOf(p: SyncProgress): SyncResult {
  return {
    kind: p.kind,
    runId: p.runId,
    from: p.from,
    to: p.to,
    days: p.daysTotal,
    totals: p.totals,
    failedDays: p.failedDays,
    enrich: p.enrich,
  };
}

/**
 * Ends a run that went through all its days: closes it in the ledger (succeeded, or failed when a
 * day failed) and returns the workflow's result, or fails the workflow naming the failed days
 * (the CLI prints that reason and exits 1).
 */
export async function endRunWithResult(p: SyncProgress): Promise<SyncResult> {
  p.phase = 'finishing';
  publish(p);
  if (p.failedDays.length > 0) {
    const reason = `${p.failedDays.length} of ${p.daysTotal} day(s) failed: ${p.failedDays.slice(0, 20).join(', ')}${p.firstError ? ` (first: ${p.firstError})` : ''}`;
    await ledger.endRun({ runId: p.runId, status: 'failed', totals: p.totals, error: reason });
    p.phase = 'failed';
    publish(p);
    throw ApplicationFailure.create({ message: reason, type: 'DAYS_FAILED', nonRetryable: true });
  }
  await ledger.endRun({ runId: p.runId, status: 'succeeded', totals: p.totals });
  p.phase = 'done';
  publish(p);
  return resultOf(p);
}

/**
 * Records how a run ended when it did not get to endRunWithResult: cancelled (children are cancelled
 * by then and have released their days) or failed. Runs outside the cancelled scope so the
 * ledger is written even while the workflow is being cancelled.
 */
export async function recordAbort(p: SyncProgress, err: unknown): Promise<void> {
  if (p.phase === 'failed' || p.phase === 'done') return;
  const cancelled = isCancellation(err);
  p.phase = cancelled ? 'cancelled' : 'failed';
  publish(p);
  const message = err instanceof Error ? err.message : String(err);
  await CancellationScope.nonCancellable(() =>
    ledger.endRun({
      runId: p.runId,
      status: cancelled ? 'cancelled' : 'failed',
      totals: p.totals,
      error: cancelled ? 'cancelled' : message.slice(0, 2000),
    }),
  );
}
