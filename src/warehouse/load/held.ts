import type pg from 'pg';
import type { LoaderClient } from '../ledger.ts';

/**
 * Held deletes against what later loads see (src/ingest/finalize/held-seen.ts decides): whether a
 * load must note its ids, the held ids a load saw released, and the held days a load may have
 * read unnoted ids of. The ledger's held figures follow in ledger.ts (`recountHeld`,
 * `requireForce`); listing and applying the held set is held-deletes.ts's.
 */

/** Whether any delete is held. */
export async function anyHeld(pool: pg.Pool): Promise<boolean> {
  const r = await pool.query<{ held: boolean }>('select exists (select 1 from held_deletes) as held');
  return r.rows[0]?.held === true;
}

/**
 * The held ids `load_seen` holds under `loadKey` leave the hold (none unless `seen`: the load
 * noted its ids); returns the day of each released row.
 */
export async function releaseSeenHeld(
  client: LoaderClient,
  loadKey: string,
  seen: boolean,
): Promise<string[]> {
  const released = await client.query<{ day: string }>(
    `delete from held_deletes h
       where $2 and exists (select 1 from load_seen s where s.load_key = $1 and s.message_id = h.message_id)
       returning h.day::text as day`,
    [loadKey, seen],
  );
  return released.rows.map((r) => r.day);
}

/** Held days, of loads other than `runId`, that are `days` (or any day when `anyDay`). */
export async function heldDaysOf(
  client: LoaderClient,
  runId: string,
  anyDay: boolean,
  days: string[],
): Promise<string[]> {
  const r = await client.query<{ day: string }>(
    `select distinct h.day::text as day from held_deletes h
     where h.load_id <> $1 and ($2 or h.day = any($3::date[]))`,
    [runId, anyDay, days],
  );
  return r.rows.map((x) => x.day);
}

/**
 * Held days, of loads other than `runId`, that the load `loadKey` counted rows or quarantined
 * lines of (`load_day_counts`), or every one of them when `anyDay`.
 */
export async function heldDaysRead(
  client: LoaderClient,
  loadKey: string,
  runId: string,
  anyDay: boolean,
): Promise<string[]> {
  const r = await client.query<{ day: string }>(
    `select distinct h.day::text as day from held_deletes h
     where h.load_id <> $2
       and ($3 or exists (select 1 from load_day_counts d where d.load_key = $1 and d.day = h.day))`,
    [loadKey, runId, anyDay],
  );
  return r.rows.map((x) => x.day);
}
