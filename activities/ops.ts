import type { EnrichCounts } from '../workflows/types.ts';

/**
 * What the activities need from the loader and the enrichment code, as plain functions. The
 * real implementations live in src/ingest and src/enrich; createActivities wires them by default.
 */
export interface DayLoadProgress {
  linesCommitted: number;
  rowsRead: number;
  bytesRead: number;
}

export interface DayLoadSummary {
  day: string;
  loadId: string;
  linesRead: number;
  bytesRead: number;
  rowsRead: number;
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
  deleted: number;
  threadsQueued: number;
}

export interface SyncOps {
  loadDay(input: {
    day: string;
    loadId: string;
    signal: AbortSignal;
    onProgress: (p: DayLoadProgress) => void;
  }): Promise<DayLoadSummary>;
  /** Thread ids waiting for enrichment, in id order, after `afterThreadId`. */
  listPendingThreads(input: { afterThreadId: string | null; limit: number }): Promise<string[]>;
  enrichThreads(input: { threadIds: string[]; loadId: string; signal: AbortSignal }): Promise<EnrichCounts>;
}
