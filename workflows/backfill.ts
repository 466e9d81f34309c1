import { ApplicationFailure, continueAsNew, setHandler, uuid4, workflowInfo } from '@temporalio/workflow';
import { emptyTotals } from '../contract/counts.ts';
import { closedDayLoad } from '../contract/load-target.ts';
import type { BackfillInput, BackfillState, SyncProgress, SyncResult } from '../contract/workflows.ts';
import { dayCount, isDay, shiftDay } from '../src/common/civil-date.ts';
import { runBounded } from './bounded.ts';
import { endRunWithResult, recordAbort } from './finish.ts';
import { ledger } from './policies.ts';
import { progressQuery } from './queries.ts';
import { runEnrich } from './run-enrich.ts';
import { loadDayInto, publish } from './run-state.ts';

const DEFAULT_DAYS_PER_RUN = 100;

/**
 * Loads every day of a range, a bounded number at a time. Each workflow run takes at most
 * `daysPerRun` days (fewer if the server suggests continuing as new), lets them finish, enriches
 * what they queued, and continues as new with its cursor and running totals, so a three-year
 * backfill is ~11 short histories instead of one long one.
 */
export async function backfill(input: BackfillInput): Promise<SyncResult> {
  if (!isDay(input.from) || !isDay(input.to) || input.from > input.to) {
    throw ApplicationFailure.nonRetryable(`invalid range ${input.from} … ${input.to}`, 'USAGE');
  }
  const first = input.state === undefined;
  const state: BackfillState = input.state ?? {
    loadId: uuid4(),
    nextIndex: 0,
    totals: emptyTotals(),
    failedDays: [],
    firstError: null,
    runs: 0,
    startedAt: workflowInfo().startTime.toISOString(),
  };
  const total = dayCount(input.from, input.to);
  const p: SyncProgress = {
    kind: 'backfill',
    loadId: state.loadId,
    phase: 'loading',
    from: input.from,
    to: input.to,
    daysTotal: total,
    daysDone: state.nextIndex,
    daysFailed: state.failedDays.length,
    daysRunning: [],
    failedDays: [...state.failedDays],
    firstError: state.firstError,
    totals: { ...state.totals },
    enrich: null,
    runs: state.runs + 1,
  };
  setHandler(progressQuery, () => p);
  publish(p);
  if (first) {
    await ledger.beginRun({
      loadId: state.loadId,
      kind: 'backfill',
      from: input.from,
      to: input.to,
      workflowId: workflowInfo().workflowId,
    });
  }
  try {
    const end = Math.min(total, state.nextIndex + (input.daysPerRun ?? DEFAULT_DAYS_PER_RUN));
    const days: string[] = [];
    for (let i = state.nextIndex; i < end; i++) days.push(shiftDay(input.from, i));
    const started = await runBounded(
      days,
      input.concurrency ?? 4,
      (day) => loadDayInto(p, closedDayLoad(state.loadId, day), state.startedAt, input.heartbeatTimeout),
      () => workflowInfo().continueAsNewSuggested,
    );
    const nextIndex = state.nextIndex + started;
    if (input.enrich !== false && started > 0) {
      p.phase = 'enriching';
      publish(p);
      p.enrich = await runEnrich(state.loadId, undefined);
    }
    if (nextIndex < total) {
      return await continueAsNew<typeof backfill>({
        ...input,
        state: {
          loadId: state.loadId,
          nextIndex,
          totals: p.totals,
          failedDays: p.failedDays,
          firstError: p.firstError,
          runs: p.runs,
          startedAt: state.startedAt,
        },
      });
    }
    return await endRunWithResult(p);
  } catch (err) {
    // continueAsNew throws to end this run; that is not a failure of the backfill.
    if (err instanceof Error && err.name === 'ContinueAsNew') throw err;
    await recordAbort(p, err);
    throw err;
  }
}
