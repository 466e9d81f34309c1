import type { EnrichCounts } from '../contract/counts.ts';
import type { DayLoad } from '../contract/load-target.ts';
import type { ExportDaySummary } from '../src/ingest/source/export-day.ts';
import type { LoadAttempt } from '../src/warehouse/ledger.ts';

/**
 * What the activities need from the loader and the enrichment code, as plain functions. The
 * real implementations live in src/ingest and src/enrich; createActivities wires them by default.
 */
export interface DayLoadProgress {
  linesCommitted: number;
  rowsRead: number;
  bytesRead: number;
}

/** What `loadDay` returns: the loader's summary of the day less its diagnostics. */
export type LoadDayResult = Omit<ExportDaySummary, 'resumedFromLine' | 'reopens' | 'elapsedMs'>;

export interface SyncOps {
  loadDay(input: {
    /** The closed day, or the open day of an intraday pull, under its run's id. */
    target: DayLoad;
    /** Which attempt of the load this is (Temporal's); the loader records it in the ledger. */
    attempt?: LoadAttempt;
    signal: AbortSignal;
    onProgress: (p: DayLoadProgress) => void;
  }): Promise<LoadDayResult>;
  /** Thread ids waiting for enrichment, in id order, after `afterThreadId`. */
  listPendingThreads(input: { afterThreadId: string | null; limit: number }): Promise<string[]>;
  enrichThreads(input: {
    threadIds: string[];
    loadId: string;
    signal: AbortSignal;
    /** After every stored page and finished thread, with the counts so far. */
    onProgress?: (counts: Readonly<EnrichCounts>) => void;
  }): Promise<EnrichCounts>;
}
