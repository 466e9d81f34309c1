import type { LoaderClient } from '../ledger.ts';

/**
 * The statements of a load's delete step (src/ingest/finalize/delete-step.ts decides, by the
 * delete guard, which of them run): the candidates of the load's complete days, the live rows it
 * did not see, into the session's temporary `crs_gone`; per day, their count against the day's
 * live rows; then either the day's held set replaced by them (`held_deletes`, for `crs-sync
 * deletes apply`) or their soft-delete.
 */

/** Drops the session's candidates (before they are found again, and when the connection is given back). */
export async function dropGone(client: LoaderClient): Promise<void> {
  await client.query('drop table if exists crs_gone');
}

/**
 * The live rows of the days `from`..`to` whose ids `load_seen` does not hold under `seenKey`
 * (`''` when the load noted none: every live row), into `crs_gone`.
 */
export async function collectGone(
  client: LoaderClient,
  from: string,
  to: string,
  seenKey: string,
): Promise<void> {
  await client.query(
    `create temp table crs_gone as
     select m.message_id, m.message_date from analytics_messages m
     where m.message_date between $1 and $2 and m._deleted_at is null
       and not exists (select 1 from load_seen s where s.load_key = $3 and s.message_id = m.message_id)`,
    [from, to, seenKey],
  );
}

/** Candidates and live rows: their counts over `from`..`to`. */
export async function goneOfRange(
  client: LoaderClient,
  from: string,
  to: string,
): Promise<{ gone: number; live: number }> {
  const n = await client.query<{ gone: number; live: number }>(
    `select (select count(*) from crs_gone)::bigint as gone,
            (select count(*) from analytics_messages where message_date between $1 and $2 and _deleted_at is null)::bigint
              as live`,
    [from, to],
  );
  return { gone: Number(n.rows[0]?.gone ?? 0), live: Number(n.rows[0]?.live ?? 0) };
}

/** Candidates and live rows of one day: their counts. */
export async function goneOfDay(client: LoaderClient, day: string): Promise<{ gone: number; live: number }> {
  const n = await client.query<{ gone: number; live: number }>(
    `select (select count(*) from crs_gone where message_date = $1)::bigint as gone,
            (select count(*) from analytics_messages where message_date = $1 and _deleted_at is null)::bigint as live`,
    [day],
  );
  return { gone: Number(n.rows[0]?.gone ?? 0), live: Number(n.rows[0]?.live ?? 0) };
}

/** Empties the day's held set (a known complete load is the better judge of the day). */
export async function clearHeldDay(client: LoaderClient, day: string): Promise<void> {
  await client.query('delete from held_deletes where day = $1', [day]);
}

/** The day's candidates held for review instead of deleted, under the run `runId`. */
export async function holdGone(client: LoaderClient, day: string, runId: string): Promise<void> {
  await client.query(
    'insert into held_deletes (day, message_id, load_id) select $1, message_id, $2 from crs_gone where message_date = $1',
    [day, runId],
  );
}

/** Soft-deletes the day's candidates that are still live; returns how many. */
export async function deleteGone(client: LoaderClient, day: string): Promise<number> {
  const del = await client.query(
    `update analytics_messages m set _deleted_at = now() from crs_gone g
     where g.message_date = $1 and m.message_id = g.message_id and m._deleted_at is null`,
    [day],
  );
  return del.rowCount ?? 0;
}
