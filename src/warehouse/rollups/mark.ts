import type { Client } from './transaction.ts';

/**
 * Marks a range of days and the threads with rows on them, as the triggers mark what a write
 * touches (`rollup_dirty_days`, `rollup_dirty_threads`), so that the refresh of the marked keys
 * recomputes them: a rebuild of a range. Threads are taken from the export rows and from the
 * rollups' own rows of those days, so a thread whose rows went away is recomputed too.
 */
export async function markRange(c: Client, range: { from: string; to: string }): Promise<void> {
  await c.query(
    `insert into rollup_dirty_days
       select d::date from generate_series($1::date, $2::date, interval '1 day') d`,
    [range.from, range.to],
  );
  await c.query(
    `insert into rollup_dirty_threads
       select distinct thread_id from analytics_messages where message_date between $1 and $2
       union select thread_id from rollup_thread_daily where message_date between $1 and $2
       union select thread_id from rollup_citation_thread_days where day between $1 and $2`,
    [range.from, range.to],
  );
}
