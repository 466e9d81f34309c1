import type { DayOutcome, EnrichCounts, LoadCounts, RunTotals } from './counts.ts';
import type { DayLoad, RecordedDayLoad } from './load-target.ts';
import type { RunRef } from './run-id.ts';

/**
 * Ids, inputs, results and progress of the crs-sync workflows. Everything here travels through
 * Temporal's history, so it holds dates, ids and counts only: never a token, a URL with
 * credentials, or a row of data; and a field once recorded keeps its name and meaning.
 *
 * A run's id is `runId` (run-id.ts). Before it had that name, these payloads carried it as
 * `loadId`: an input that may have been recorded so (a workflow's start or continue-as-new) is a
 * `RunRef`, read with `runIdOf`. Results and progress are read by clients, never by workflow
 * code: this release writes `runId` in them; a client reading a result of a run an earlier
 * release finished reads it with `runIdOf` too (src/cli/follow.ts).
 */

/** Every day load has this workflow id, so at most one execution per day can run at a time. */
export const DAY_WORKFLOW_PREFIX = 'crs-sync-day-';
/** Enrichment is one stream over the pending threads; one execution at a time. */
export const ENRICH_WORKFLOW_ID = 'crs-sync-enrich';

export function dayWorkflowId(day: string): string {
  return `${DAY_WORKFLOW_PREFIX}${day}`;
}

export type SyncKind = 'scheduled' | 'manual' | 'backfill' | 'intraday';

/**
 * How a run's day loads notice a lost worker and pace their retries; each field defaults to the
 * day load's own policy (src/common/activity-timeouts.ts). A run passes them on to its day
 * workflows; the number of attempts and the longest pause between two stay the policy's.
 */
export interface LoadTimings {
  /** How long the load may go without a heartbeat before Temporal retries it elsewhere (default 30s). */
  heartbeatTimeout?: string;
  /** The first pause between two attempts of the load (default 5s), doubling at each attempt; at most 5 minutes. */
  retryInterval?: string;
}

/** The timings set in a run's input, and no other field (a day workflow's input carries them). */
export function loadTimingsOf(input: LoadTimings): LoadTimings {
  return {
    ...(input.heartbeatTimeout ? { heartbeatTimeout: input.heartbeatTimeout } : {}),
    ...(input.retryInterval ? { retryInterval: input.retryInterval } : {}),
  };
}

/** The intraday schedule's runs (`crs-sync schedule create --intraday EVERY`). */
export interface SyncIntradayInput extends LoadTimings {
  enrich?: boolean;
  /**
   * The instant the run acts as of (ISO); default the workflow's start time (for a schedule, the
   * scheduled time). Tests and a simulator on another clock set it.
   */
  now?: string;
}

/**
 * A day workflow's input: the day load (a closed day, or the open day of an intraday pull, under
 * the run's id, the same on every retry, so the loader resumes). Histories recorded before load
 * targets hold the day, the run id (as `loadId`) and `partial` instead: `dayLoadOf` reads both.
 */
export type SyncDayInput = DayWorkflowInput | (RecordedDayLoad & LoadTimings);

export interface DayWorkflowInput extends LoadTimings {
  target: DayLoad;
}

/** What syncDay returns: the figures of the day's load (the loader's counts, under their names). */
export interface DayResult extends LoadCounts {
  day: string;
  /** The run that loaded the day (recorded results: `loadId`; no workflow reads it). */
  runId: string;
  outcome: DayOutcome;
  /** The load was an intraday pull (the day is `partial`): a run that needs the day complete loads it again. */
  partial?: boolean;
}

export type EnrichInput = RunRef & EnrichOptions;

export interface EnrichOptions {
  /** Thread ids per enrichThreads activity. */
  batchSize?: number;
  /** Batches in flight at once. */
  concurrency?: number;
  /** Pages of pending threads per workflow run before it continues as new. */
  pagesPerRun?: number;
  /** Carried over continue-as-new. */
  state?: { afterThreadId: string | null; totals: EnrichCounts; runs: number };
}

export interface SyncWindowInput extends LoadTimings {
  kind: 'scheduled' | 'manual';
  /** Explicit window; when absent it is planned from the ledger (watermark − lookback … yesterday UTC). */
  from?: string;
  to?: string;
  enrich?: boolean;
  /** Days loaded at once (default 2). */
  concurrency?: number;
}

export interface BackfillInput extends LoadTimings {
  from: string;
  to: string;
  /** Days loaded at once (default 4). */
  concurrency?: number;
  enrich?: boolean;
  /**
   * Days handled per workflow run before it continues as new (default 100). Each day costs a
   * handful of history events, so a run stays far below Temporal's history limits; tests set it low.
   */
  daysPerRun?: number;
  /** Carried over continue-as-new; absent on the first run. */
  state?: BackfillState;
}

/** A backfill's cursor and figures, carried over continue-as-new; its run's id as RunRef. */
export type BackfillState = RunRef & BackfillCursor;

export interface BackfillCursor {
  nextIndex: number;
  totals: RunTotals;
  failedDays: string[];
  firstError: string | null;
  runs: number;
  /** When the backfill began: days another run loads after this are not loaded again. */
  startedAt: string;
}

export interface SyncProgress {
  kind: SyncKind;
  runId: string;
  phase: 'planning' | 'loading' | 'enriching' | 'finishing' | 'done' | 'failed' | 'cancelled';
  from: string | null;
  to: string | null;
  daysTotal: number;
  daysDone: number;
  daysFailed: number;
  daysRunning: string[];
  failedDays: string[];
  /** Why the first failed day failed (the root cause's message). */
  firstError: string | null;
  totals: RunTotals;
  enrich: EnrichCounts | null;
  /** Workflow runs so far (continue-as-new). */
  runs: number;
}

export interface SyncResult {
  kind: SyncKind;
  /** The run's id (results of runs an earlier release finished: `loadId`; read with runIdOf). */
  runId: string;
  from: string | null;
  to: string | null;
  days: number;
  totals: RunTotals;
  failedDays: string[];
  enrich: EnrichCounts | null;
}

export interface DayProgress {
  day: string;
  runId: string;
  phase: 'loading' | 'waiting' | 'done' | 'failed' | 'cancelled';
  linesCommitted: number;
}
