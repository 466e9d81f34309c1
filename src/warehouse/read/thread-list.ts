import { type Queryable, rowsOf } from './queryable.ts';

/**
 * How the enrichment's reads of the thread list went (`thread_list_reads`, written by
 * src/enrich/thread-names.ts). While the last read failed, thread names are not updated and
 * threads whose history grew are not queued again by it: enrichment itself goes on.
 */
export interface ThreadListReads {
  /** The last read failed. */
  failing: boolean;
  /** Failed reads since the last that worked (0 while it works). */
  failures: number;
  /** Every failed read so far. */
  failuresTotal: number;
  /** The first failed read since the last that worked (ISO); null while it works. */
  failingSince: string | null;
  lastOkAt: string | null;
  lastFailedAt: string | null;
  /** The last failure's error (kept after a read that worked). */
  lastError: string | null;
}

interface Row {
  failures: number;
  failures_total: string;
  failing_since: Date | null;
  last_ok_at: Date | null;
  last_failed_at: Date | null;
  last_error: string | null;
}

/** The reads so far: none failing and no time at all before the first read. */
export async function readThreadListReads(q: Queryable): Promise<ThreadListReads> {
  const [r] = await rowsOf<Row>(
    q,
    `select failures, failures_total, failing_since, last_ok_at, last_failed_at, last_error
       from thread_list_health`,
  );
  const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);
  return {
    failing: (r?.failures ?? 0) > 0,
    failures: Number(r?.failures ?? 0),
    failuresTotal: Number(r?.failures_total ?? 0),
    failingSince: iso(r?.failing_since),
    lastOkAt: iso(r?.last_ok_at),
    lastFailedAt: iso(r?.last_failed_at),
    lastError: r?.last_error ?? null,
  };
}
