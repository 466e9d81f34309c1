/**
 * The counts of a load: one type from a batch up to a run's totals and the CLI summary. It also
 * travels through Temporal's history (a day's result, a run's totals), so its field names are a
 * contract with histories already recorded: rename nothing, add fields only as optional readers
 * would tolerate. Pure functions only: workflow code imports this module.
 */
export interface LoadCounts {
  /** Lines of the source read (blank lines included). */
  linesRead: number;
  /** Bytes of the source read. */
  bytesRead: number;
  /** Lines that held a record or a rejected record (blank lines excluded). */
  rowsRead: number;
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
  /**
   * Lines dropped because `crs-sync forget` erased their user or thread (counted in `rowsRead`;
   * neither written nor deleted). Absent from results recorded before it: read as 0.
   */
  suppressed: number;
  /** Rows soft-deleted because the source no longer holds them. */
  deleted: number;
  /** Threads appended to the enrichment queue. */
  threadsQueued: number;
}

export const COUNT_FIELDS = [
  'linesRead',
  'bytesRead',
  'rowsRead',
  'inserted',
  'updated',
  'unchanged',
  'rejected',
  'suppressed',
  'deleted',
  'threadsQueued',
] as const satisfies readonly (keyof LoadCounts)[];

export function emptyCounts(): LoadCounts {
  return {
    linesRead: 0,
    bytesRead: 0,
    rowsRead: 0,
    inserted: 0,
    updated: 0,
    unchanged: 0,
    rejected: 0,
    suppressed: 0,
    deleted: 0,
    threadsQueued: 0,
  };
}

/**
 * Adds `more` into `into` and returns it. Missing or non-finite fields count as 0, so a result
 * recorded by an older release (a field it did not have) adds cleanly.
 */
export function addCounts(into: LoadCounts, more: Partial<Readonly<LoadCounts>>): LoadCounts {
  for (const f of COUNT_FIELDS) {
    const v = more[f];
    if (typeof v === 'number' && Number.isFinite(v)) into[f] += v;
  }
  return into;
}

/** The sum of any number of counts, as a new object. */
export function sumCounts(...parts: readonly Partial<Readonly<LoadCounts>>[]): LoadCounts {
  const total = emptyCounts();
  for (const p of parts) addCounts(total, p);
  return total;
}

/** Just the count fields of a wider object (a summary that carries more than counts). */
export function pickCounts(from: Partial<Readonly<LoadCounts>>): LoadCounts {
  return addCounts(emptyCounts(), from);
}
