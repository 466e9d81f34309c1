/**
 * What the mixed forms (`Source` 'mixed') share: the marked days and the keys whose rollup rows may
 * differ from the raw rows in this snapshot.
 *
 * The rollups are exact for the raw rows as they were at the last refresh; since then only the
 * marked keys changed (the triggers mark every write, in its transaction). So a figure that is a
 * sum over users, threads or sources is the rollups' figure with the touched keys' part as the
 * rollups hold it taken out and their part as it is now put in; a top list is the rollups' list
 * of the untouched keys merged with the touched ones as they are now. Either way a reader's cost
 * follows the marked keys, not the table.
 *
 * - A user's figures depend on its export rows only: touched when it has rows on a marked day,
 *   in the rollups (then) or the raw table (now).
 * - A thread's also on its history, citations, artifacts and status: touched when it has rows on
 *   a marked day, then or now, or is marked itself.
 */
import { STALE_DAYS_SQL } from '../rollups/status.ts';

/** `stale`: the marked days (all of them; a query narrows them to its range where it may). */
export const STALE_CTE = `stale as (select distinct day from (${STALE_DAYS_SQL}) s)`;

/** `stale`: the marked days of the range $1..$2 only. */
export const STALE_IN_RANGE_CTE = `stale as (select distinct day from (${STALE_DAYS_SQL}) s
  where day between $1::date and $2::date)`;

/**
 * The marked days as an array, for `= any(…)` / `<> all(…)`: evaluated once, and an index scan
 * by day takes the values (`in (select …)` made PostgreSQL hash the whole table instead).
 */
export const STALE_DAYS = 'array(select day from stale)';

/** `m`'s live export rows of the marked days, with the columns asked for; `range` keeps $1..$2 only. */
export const markedRows = (columns: string, range: boolean) =>
  `select ${columns} from analytics_messages
    where _deleted_at is null and message_date = any(${STALE_DAYS})${
      range ? ' and message_date between $1::date and $2::date' : ''
    }`;

/**
 * `column not in (the keys of cte)`, for a filter evaluated once per row of a large scan: always a
 * hashed lookup. PostgreSQL hashes a `not in (select …)` only when it estimates the subquery's rows
 * fit work_mem, else it reads the whole subquery again for every row. The touched keys' estimate is
 * a guess (rollup_dirty_threads is a queue: its pages, not its rows, and "ten" marked days), half a
 * million with one 96k-row day marked, so the top threads ran 37k rows × 37k touched threads (90 s).
 * An `unnest` of the keys as an array is estimated at ten rows: hashed, once, at its real size.
 */
export const notIn = (column: string, key: string, cte: string) =>
  `${column} not in (select unnest(array(select ${key} from ${cte})))`;

/**
 * `a`: the touched threads (needs `stale` and `m`, the marked days' live rows with a `thread_id`):
 * marked, or with rollup rows on a marked day (what the last refresh saw), or with rows there now.
 */
export const TOUCHED_THREADS_CTE = `a as materialized (
    select thread_id from rollup_marked_threads
    union select thread_id from rollup_thread_daily where message_date = any(${STALE_DAYS})
    union select thread_id from m)`;

/** The depth bucket of a count of stored history entries (as the rollups' `depth`: 0..5). */
export const DEPTH = (n: string) => `case when coalesce(${n}, 0) = 0 then 0 when ${n} <= 2 then 1
  when ${n} <= 5 then 2 when ${n} <= 10 then 3 when ${n} <= 20 then 4 else 5 end`;
