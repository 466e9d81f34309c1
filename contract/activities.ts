import type { EnrichCounts, LoadCounts, RunTotals } from './counts.ts';
import type { DayLoad, RecordedDayLoad } from './load-target.ts';
import type { RunRef } from './run-id.ts';
import type { DayResult, SyncKind } from './workflows.ts';

/**
 * The activities of crs-sync as the workflows call them: each one's name, argument and result.
 * The names are the activity types recorded in histories and the arguments and results their
 * payloads, so an activity is never renamed and a field never changes its meaning; a new field
 * is optional. Arguments and results are dates, ids and counts: credentials stay on the worker.
 * activities/index.ts implements this interface (`createActivities`), and workflows/policies.ts
 * proxies it; neither folder imports the other.
 */
export interface Activities {
  /** The window a scheduled or manual run loads: explicit dates, or planned from the ledger. */
  planSyncWindow(input: PlanInput): Promise<PlanResult>;
  workerSettings(): Promise<WorkerSettings>;
  beginRun(input: BeginRunInput): Promise<void>;
  endRun(input: EndRunInput): Promise<void>;
  /** One day of the export loaded (or resumed from its checkpoint under the same run id). */
  loadExportDay(input: DayLoadInput): Promise<LoadCounts>;
  /** A day the load did not finish: back to pending when cancelled, else failed. */
  releaseDay(input: ReleaseDayInput): Promise<boolean>;
  /** The day's last load when it completed at or after `since`, or null. */
  dayLoadedSince(input: DayLoadedSinceInput): Promise<DayResult | null>;
  /** The result of another run's day workflow, or null when it ended without loading the day. */
  awaitDayWorkflow(input: AwaitWorkflowInput): Promise<DayResult | null>;
  /** The result of another run's enrichment stream, or null when it did not complete. */
  awaitEnrichWorkflow(input: AwaitWorkflowInput): Promise<EnrichCounts | null>;
  listPendingThreads(input: PendingThreadsInput): Promise<string[]>;
  enrichThreads(input: EnrichBatchInput): Promise<EnrichCounts>;
  /** The daily sweep of text past the worker's CRS_TEXT_RETENTION_DAYS (none set: nothing done). */
  sweepRetainedText(): Promise<RetentionSweep>;
}

/** What the daily retention sweep cleared: rows per table; `retentionDays` null when none is set. */
export interface RetentionSweep {
  retentionDays: number | null;
  /** Text of rows before this UTC day was cleared. */
  before: string | null;
  rows: Record<string, number>;
}

/** Every activity type, as recorded in histories: the worker registers exactly these. */
export const ACTIVITY_NAMES = [
  'planSyncWindow',
  'workerSettings',
  'beginRun',
  'endRun',
  'loadExportDay',
  'releaseDay',
  'dayLoadedSince',
  'awaitDayWorkflow',
  'awaitEnrichWorkflow',
  'listPendingThreads',
  'enrichThreads',
  'sweepRetainedText',
] as const satisfies readonly (keyof Activities)[];

export interface PlanInput {
  from?: string;
  to?: string;
  /** The workflow's start time (ISO), the "today" the window is planned against. */
  now: string;
}

export interface PlanResult {
  from: string;
  to: string;
  days: string[];
  enrichConcurrency: number;
}

export interface WorkerSettings {
  enrichConcurrency: number;
}

/** The run as it begins: its id (`runId`; recorded: `loadId`, read with runIdOf), kind and window. */
export type BeginRunInput = RunRef & {
  kind: SyncKind;
  from: string | null;
  to: string | null;
  workflowId: string;
};

/** The run as it ends (its id: `runId`; recorded: `loadId`, read with runIdOf). */
export type EndRunInput = RunRef & {
  status: 'succeeded' | 'failed' | 'cancelled';
  totals: RunTotals;
  error?: string;
};

/**
 * The day load to run. An activity scheduled by a history recorded before load targets carries
 * the day, the run id (as `loadId`) and `partial` instead: `dayLoadOf` reads both.
 */
export type DayLoadInput = { target: DayLoad } | RecordedDayLoad;

/**
 * A day load that did not finish (an open day stays `partial`), and why: `cancelled`, or why the
 * load failed. Recorded before load targets: the day, `loadId` and `partial` instead.
 */
export type ReleaseDayInput = DayLoadInput & { reason: string };

export interface DayLoadedSinceInput {
  day: string;
  /** ISO time: the run's start. */
  since: string;
}

export interface AwaitWorkflowInput {
  workflowId: string;
  /** The waiting run's id, kept alive in the ledger while it waits (optionalRunIdOf). */
  runId?: string;
  /** The same, as recorded before `runId`. */
  loadId?: string;
}

export interface PendingThreadsInput {
  afterThreadId: string | null;
  limit: number;
}

/** A batch of threads to enrich, for a run (`runId`; recorded: `loadId`, read with runIdOf). */
export type EnrichBatchInput = RunRef & {
  threadIds: string[];
};
