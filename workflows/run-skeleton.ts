import { setHandler, workflowInfo } from '@temporalio/workflow';
import { emptyTotals } from '../contract/counts.ts';
import type { SyncProgress, SyncResult } from '../contract/workflows.ts';
import { endRunWithResult, recordAbort } from './finish.ts';
import { ledger } from './policies.ts';
import { progressQuery } from './queries.ts';
import { runEnrich } from './run-enrich.ts';
import { publish } from './run-state.ts';

/**
 * The skeleton every run of days shares (syncWindow, syncIntraday, backfill): its progress,
 * queryable and shown in the UI; the run begun in the ledger; its days loaded; the threads they
 * queued enriched; the run ended in the ledger, or its abort recorded. Each workflow says only
 * what differs: how it plans and loads its days, whether and how wide it enriches, how it ends.
 * The order of the commands is the one the recorded histories hold: changing it breaks replay.
 */

/** What a run's progress starts from; the counters start at zero unless given. */
export type ProgressStart = Pick<SyncProgress, 'kind' | 'runId' | 'from' | 'to'> & Partial<SyncProgress>;

/** A run's progress, answering the progress query and published, as the run starts. */
export function openProgress(start: ProgressStart): SyncProgress {
  const p: SyncProgress = {
    phase: 'planning',
    daysTotal: 0,
    daysDone: 0,
    daysFailed: 0,
    daysRunning: [],
    failedDays: [],
    firstError: null,
    totals: emptyTotals(),
    enrich: null,
    runs: 1,
    ...start,
  };
  setHandler(progressQuery, () => p);
  publish(p);
  return p;
}

export interface RunSteps {
  /** Begins the run in the ledger (default); false for a backfill continued as new, begun already. */
  begin?: boolean;
  /** Loads the run's days; true when there may be threads to enrich. */
  load: () => Promise<boolean>;
  /** The enrichment's width (undefined: the worker's), or null when the run does not enrich. */
  enrichConcurrency: (() => Promise<number | undefined>) | null;
  /** How the run ends once enriched (default: closed in the ledger, its result returned). */
  finish?: () => Promise<SyncResult>;
}

export async function runSkeleton(p: SyncProgress, steps: RunSteps): Promise<SyncResult> {
  if (steps.begin !== false) {
    await ledger.beginRun({
      runId: p.runId,
      kind: p.kind,
      from: p.from,
      to: p.to,
      workflowId: workflowInfo().workflowId,
    });
  }
  try {
    p.phase = 'loading';
    const loaded = await steps.load();
    if (steps.enrichConcurrency && loaded) {
      p.phase = 'enriching';
      publish(p);
      p.enrich = await runEnrich(p.runId, await steps.enrichConcurrency());
    }
    return await (steps.finish ?? (() => endRunWithResult(p)))();
  } catch (err) {
    // continueAsNew throws to end this run; that is not a failure of the run.
    if (err instanceof Error && err.name === 'ContinueAsNew') throw err;
    await recordAbort(p, err);
    throw err;
  }
}
