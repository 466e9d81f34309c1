import { ApplicationFailure, continueAsNew, uuid4, workflowInfo } from '@temporalio/workflow';
import { emptyTotals } from '../contract/counts.ts';
import { closedDayLoad } from '../contract/load-target.ts';
import { runIdOf } from '../contract/run-id.ts';
import type { BackfillInput, BackfillState, SyncResult } from '../contract/workflows.ts';
import { dayCount, isDay, shiftDay } from '../src/common/civil-date.ts';
import { runBounded } from './bounded.ts';
import { endRunWithResult } from './finish.ts';
import { openProgress, runSkeleton } from './run-skeleton.ts';
import { loadDayInto } from './run-state.ts';

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
    runId: uuid4(),
    nextIndex: 0,
    totals: emptyTotals(),
    failedDays: [],
    firstError: null,
    runs: 0,
    startedAt: workflowInfo().startTime.toISOString(),
  };
  // A backfill continued as new by an earlier release carries its run id as `loadId`.
  const runId = runIdOf(state);
  const total = dayCount(input.from, input.to);
  const p = openProgress({
    kind: 'backfill',
    runId,
    phase: 'loading',
    from: input.from,
    to: input.to,
    daysTotal: total,
    daysDone: state.nextIndex,
    daysFailed: state.failedDays.length,
    failedDays: [...state.failedDays],
    firstError: state.firstError,
    totals: { ...state.totals },
    runs: state.runs + 1,
  });
  let nextIndex = state.nextIndex;
  return runSkeleton(p, {
    begin: first,
    load: async () => {
      const end = Math.min(total, state.nextIndex + (input.daysPerRun ?? DEFAULT_DAYS_PER_RUN));
      const days: string[] = [];
      for (let i = state.nextIndex; i < end; i++) days.push(shiftDay(input.from, i));
      const started = await runBounded(
        days,
        input.concurrency ?? 4,
        (day) => loadDayInto(p, closedDayLoad(runId, day), state.startedAt, input),
        () => workflowInfo().continueAsNewSuggested,
      );
      nextIndex = state.nextIndex + started;
      return started > 0;
    },
    // Its enrichment reads the worker's width itself.
    enrichConcurrency: input.enrich !== false ? async () => undefined : null,
    finish: async () => {
      if (nextIndex >= total) return endRunWithResult(p);
      return continueAsNew<typeof backfill>({
        ...input,
        state: {
          runId,
          nextIndex,
          totals: p.totals,
          failedDays: p.failedDays,
          firstError: p.firstError,
          runs: p.runs,
          startedAt: state.startedAt,
        },
      });
    },
  });
}
