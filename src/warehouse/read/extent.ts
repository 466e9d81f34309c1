/**
 * Where the data lies: the first and last days with live rows (the dashboard's default range ends
 * at the last), the days any ranged figure can fall on (a range is cut to them before any per-day
 * query), and the two questions the rollup forms ask before they pick a shortcut.
 */
import { type DayRange, type Queryable, rowsOf } from './queryable.ts';
import type { Source } from './source.ts';

export interface DataExtent {
  firstDay: string | null;
  lastDay: string | null;
}

/** The first and last export day with live rows: the default range ends at the last. */
export async function dataExtent(q: Queryable, source: Source): Promise<DataExtent> {
  // min()/max() rather than order by … limit 1: PostgreSQL answers each from the date index.
  const [r] = await rowsOf<DataExtent>(
    q,
    source === 'rollup'
      ? `select min(message_date)::text as "firstDay", max(message_date)::text as "lastDay"
           from rollup_daily where messages > 0`
      : `select min(message_date)::text as "firstDay", max(message_date)::text as "lastDay"
           from analytics_messages where _deleted_at is null`,
  );
  return r ?? { firstDay: null, lastDay: null };
}

/**
 * The first and last day any ranged figure can fall on: the export days of `extent` and the days
 * of citations, which count on their history entry's day (that may lie outside the export days).
 * From the rollups, the citation days' own ends (two index reads); from the raw tables, the ends
 * of the history entries' days, a superset of the citation days (a full read of the history:
 * no index by time); mixed, the rollups' ends and the marked threads' entries. What the server cuts a range to
 * before any per-day query (range.ts `clampToData`).
 */
export async function dataSpan(q: Queryable, extent: DataExtent, source: Source): Promise<DataExtent> {
  const [c] = await rowsOf<DataExtent>(
    q,
    source === 'rollup'
      ? `select min(day)::text as "firstDay", max(day)::text as "lastDay" from rollup_citation_type_daily`
      : source === 'mixed'
        ? // The rollups' ends and the history entries' days of the marked threads (the only ones
          // whose citations or entries can have moved; a citation dated by its thread's first
          // export row falls within the extent): a superset of the citation days, as the raw form's.
          `select min(day)::text as "firstDay", max(day)::text as "lastDay" from (
             select min(day) as day from rollup_citation_type_daily
             union all select max(day) from rollup_citation_type_daily
             union all select (min(created_at) at time zone 'UTC')::date from thread_messages
                        where thread_id in (select thread_id from rollup_marked_threads)
             union all select (max(created_at) at time zone 'UTC')::date from thread_messages
                        where thread_id in (select thread_id from rollup_marked_threads)) x`
        : `select (min(created_at) at time zone 'UTC')::date::text as "firstDay",
                (max(created_at) at time zone 'UTC')::date::text as "lastDay"
           from thread_messages`,
  );
  const ends = (a: string | null, b: string | null | undefined, pick: (x: string, y: string) => string) =>
    a && b ? pick(a, b) : (a ?? b ?? null);
  return {
    firstDay: ends(extent.firstDay, c?.firstDay, (x, y) => [x, y].sort()[0] as string),
    lastDay: ends(extent.lastDay, c?.lastDay, (x, y) => [x, y].sort()[1] as string),
  };
}

/**
 * Whether the range holds every day that has live rows. Then the all-time rollups (rollup_users,
 * rollup_threads: one row per user or thread) give the same figures as the per-day ones without
 * counting distinct keys over every day: "all" on a year of data stays one small table's read.
 */
export async function coversAll(q: Queryable, r: DayRange): Promise<boolean> {
  const [c] = await rowsOf<{ covers: boolean | null }>(
    q,
    `select $1::date <= min(message_date) and $2::date >= max(message_date) as covers
       from rollup_daily where messages > 0`,
    [r.from, r.to],
  );
  return c?.covers === true;
}

/**
 * Whether the range starts on or before the first day with live rows. Then every entity counts on
 * its first day ever (no previous day), and the first days alone answer: `rollup_thread_firsts`,
 * the partial index of `rollup_user_daily` on first days.
 */
export async function startsWithData(q: Queryable, r: DayRange): Promise<boolean> {
  const [c] = await rowsOf<{ starts: boolean | null }>(
    q,
    `select $1::date <= min(message_date) as starts from rollup_daily where messages > 0`,
    [r.from],
  );
  return c?.starts === true;
}
