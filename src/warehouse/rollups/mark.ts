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
  // What waits in the range is recomputed now: waiting marks there would only make a refresh redo it.
  await c.query(
    `with d as (delete from rollup_waiting_days where day between $1 and $2 returning day)
     delete from rollup_waiting_threads where day between $1 and $2`,
    [range.from, range.to],
  );
}

/**
 * The transaction setting that makes the export-row trigger note a write of `day` as waiting
 * (`rollup_waiting_days`) instead of marking it (migration 2026-11-27T13-00-00): set by each batch
 * of a pull of one export day (daily, backfill, intraday) and by its delete step, whose finalize
 * releases the day (`RELEASE_WAITING_SQL`) in its refresh. Readers meanwhile read the day as its
 * last refresh left it. `day` is checked, as it becomes SQL text.
 */
export function marksWaitSql(day: string): string {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) throw new Error(`not a UTC day: ${JSON.stringify(day)}`);
  return `set local crs_sync.marks_wait_day = '${day}'`;
}

/**
 * Which waiting marks a refresh releases: the days of a pull that finished (its finalize), or
 * every waiting day (`crs-sync rollups refresh`, a rebuild).
 */
export type Release = readonly string[] | 'all';

/**
 * Takes the waiting marks of `$1` (an array of days; null: all), in the refresh's transaction, into
 * its temporary table `rd_waited`: a row per waiting day (no thread) and per thread a write of that
 * day noted (migration 2026-11-27T16-00-00). One statement, so that both deletes share its
 * snapshot: a write committing meanwhile leaves its day and its threads waiting together, for the
 * next release, never its day without its threads.
 */
export const RELEASE_WAITING_SQL = `with d as (delete from rollup_waiting_days where $1::date[] is null or day = any($1::date[])
    returning day),
  t as (delete from rollup_waiting_threads where $1::date[] is null or day = any($1::date[]) returning day, thread_id)
  insert into rd_waited select day, null::uuid from d union all select day, thread_id from t`;

/** Whether any waiting mark of `$1` (as RELEASE_WAITING_SQL) is there to release. */
export const WAITING_SQL =
  'exists (select 1 from rollup_waiting_days where $1::date[] is null or day = any($1::date[]))';

export const releaseParam = (r: Release): string[] | null => (r === 'all' ? null : [...r]);
