import { setHandler, uuid4, workflowInfo } from '@temporalio/workflow';
import { emptyTotals } from '../contract/counts.ts';
import { closedDayLoad } from '../contract/load-target.ts';
import type { SyncProgress, SyncResult, SyncWindowInput } from '../contract/workflows.ts';
import { runBounded } from './bounded.ts';
import { endRunWithResult, recordAbort } from './finish.ts';
import { ledger } from './policies.ts';
import { progressQuery } from './queries.ts';
import { runEnrich } from './run-enrich.ts';
import { loadDayInto, publish } from './run-state.ts';

/**
 * A sync of a window of days: by default planned from the ledger (watermark minus the lookback,
 * to yesterday UTC, as of the workflow's start time, which for a schedule is the scheduled
 * time), else the explicit dates. Each day is a child `syncDay`; then the queued threads are
 * enriched.
 */
export async function syncWindow(input: SyncWindowInput): Promise<SyncResult> {
  const p: SyncProgress = {
    kind: input.kind,
    loadId: uuid4(),
    phase: 'planning',
    from: input.from ?? null,
    to: input.to ?? null,
    daysTotal: 0,
    daysDone: 0,
    daysFailed: 0,
    daysRunning: [],
    failedDays: [],
    firstError: null,
    totals: emptyTotals(),
    enrich: null,
    runs: 1,
  };
  setHandler(progressQuery, () => p);
  publish(p);
  const plan = await ledger.planSyncWindow({
    ...(input.from ? { from: input.from } : {}),
    ...(input.to ? { to: input.to } : {}),
    now: new Date().toISOString(),
  });
  p.from = plan.from;
  p.to = plan.to;
  p.daysTotal = plan.days.length;
  await ledger.beginRun({
    loadId: p.loadId,
    kind: input.kind,
    from: plan.from,
    to: plan.to,
    workflowId: workflowInfo().workflowId,
  });
  const since = workflowInfo().startTime.toISOString();
  try {
    p.phase = 'loading';
    await runBounded(plan.days, input.concurrency ?? 2, (day) =>
      loadDayInto(p, closedDayLoad(p.loadId, day), since, input.heartbeatTimeout),
    );
    if (input.enrich !== false && plan.days.length > 0) {
      p.phase = 'enriching';
      publish(p);
      p.enrich = await runEnrich(p.loadId, plan.enrichConcurrency);
    }
    return await endRunWithResult(p);
  } catch (err) {
    await recordAbort(p, err);
    throw err;
  }
}
