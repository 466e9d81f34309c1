import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  ChildWorkflowCancellationType,
  executeChild,
  ParentClosePolicy,
  WorkflowIdReusePolicy,
} from '@temporalio/workflow';
import type { DayLoad } from '../contract/load-target.ts';
import { type DayResult, dayWorkflowId, type LoadTimings, loadTimingsOf } from '../contract/workflows.ts';
import { lookup, waiting } from './policies.ts';
import { syncDay } from './sync-day.ts';

/** Taking the id over from other runs more often than this means something is wrong. */
const MAX_ATTACH = 3;

/**
 * Loads a day as a child workflow under the day's fixed id, unless another run has loaded it
 * since this run started (`since`): then that load is as fresh as this one would be, and its
 * figures are taken over. When another run is loading the day right now (the id is taken), this
 * run attaches: it waits for that execution and takes its result; if that execution ends without
 * loading the day, this run loads it itself. So a backfill that reaches a day the schedule is
 * loading, or has just loaded, neither loads it a second time nor skips it.
 *
 * An open day's load (an intraday pull): The same id serialises it with every other load
 * of the day. A run that needs the day complete and finds an intraday pull running waits for it,
 * then loads the day itself (a partial pull deletes nothing, so its result cannot stand for a
 * complete one); an intraday pull that finds a complete load running takes its result.
 */
export async function runDay(target: DayLoad, since: string, timings: LoadTimings = {}): Promise<DayResult> {
  const { day, runId } = target;
  const open = target.kind === 'open-day';
  const workflowId = dayWorkflowId(day);
  const fresh = await lookup.dayLoadedSince({ day, since });
  if (fresh) return fresh;
  for (let attempt = 1; ; attempt++) {
    try {
      return await executeChild(syncDay, {
        workflowId,
        args: [{ target, ...loadTimingsOf(timings) }],
        // A finished day may be loaded again (late data, an explicit re-run); a running one may not.
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        // Cancelling or terminating the parent asks the day to stop cleanly and release the ledger.
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
        staticSummary: open ? `intraday pull ${day}` : `load ${day}`,
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError) || attempt >= MAX_ATTACH) throw err;
      const theirs = await waiting.awaitDayWorkflow({ workflowId, runId });
      if (theirs && (open || !theirs.partial)) return { ...theirs, outcome: 'attached' };
    }
  }
}
