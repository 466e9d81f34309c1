import type pg from 'pg';
import type { LoaderClient } from '../ledger.ts';
import { type CopyInput, copyIn } from './batch.ts';

/**
 * The statements of the delete guard (src/ingest/finalize/delete-step.ts and finalize.ts decide
 * which of them run), over the three tables it keeps:
 *
 * - `load_seen`: the message ids a load saw (src/ingest/merge/seen-spill.ts spills them in chunks
 *   of binary COPY tuples, load key and 16-byte uuid). UNLOGGED: a crash empties it, which the
 *   finalize checks (`countSeen`) before it trusts it.
 * - `crs_gone`, the session's temporary candidates: the live rows of the load's complete days it
 *   did not see; per day, their count against the day's live rows; then either the day's held set
 *   replaced by them or their soft-delete, and when they were deleted, the day's open rejects of
 *   lines the load did not quarantine again closed (`rejected_records`).
 * - `held_deletes` (for `crs-sync deletes apply`) against what later loads see: whether a load must
 *   note its ids, the held ids a load saw released, the held days a load may have read unnoted ids
 *   of. The ledger's held figures follow in ledger.ts (`recountHeld`, `requireForce`); listing and
 *   applying the held set is held-deletes.ts's.
 */

// ---- load_seen: the ids a load saw ----------------------------------------------------------

/** Removes what a load spilled (an earlier attempt's, or its own once its finalize is done). */
export async function clearSeen(pool: pg.Pool, loadKey: string): Promise<void> {
  await pool.query('delete from load_seen where load_key = $1', [loadKey]);
}

/** One chunk of ids into `load_seen`, on a connection of its own; `fill` writes the whole COPY input. */
export async function copySeen(pool: pg.Pool, fill: (input: CopyInput) => void): Promise<void> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await copyIn(client, 'copy load_seen (load_key, message_id) from stdin (format binary)', fill);
  } catch (err) {
    broken = err as Error;
    throw err;
  } finally {
    client.release(broken);
  }
}

/**
 * Removes the ids spilled by loads that are no longer running: a load holds its session advisory
 * lock (lock.ts, named `loadLockPrefix` + load key) as long as it runs, so a load key in
 * `load_seen` without that lock granted is a load that was killed before its finalize or its
 * discard. The keys are listed by a loose scan of the (load_key, message_id) index, not a read of
 * every id. Returns how many ids went.
 */
export async function removeDeadSpills(pool: pg.Pool, lockPrefix: string): Promise<number> {
  const r = await pool.query(
    `with recursive k(load_key) as (
       (select load_key from load_seen order by load_key limit 1)
       union all
       select (select s.load_key from load_seen s where s.load_key > k.load_key order by s.load_key limit 1)
       from k where k.load_key is not null
     ),
     dead as (
       select k.load_key from k
       where k.load_key is not null and not exists (
         select 1 from pg_locks l
         where l.locktype = 'advisory' and l.granted and l.objsubid = 1
           and l.database = (select oid from pg_database where datname = current_database())
           and l.classid::bigint = (hashtext($1 || k.load_key)::bigint >> 32) & 4294967295
           and l.objid::bigint = hashtext($1 || k.load_key)::bigint & 4294967295)
     )
     delete from load_seen s using dead where s.load_key = dead.load_key`,
    [lockPrefix],
  );
  return r.rowCount ?? 0;
}

/** How many ids `load_seen` holds under the load key (duplicates included). */
export async function countSeen(client: LoaderClient, loadKey: string): Promise<number> {
  const r = await client.query<{ n: number }>(
    'select count(*)::bigint as n from load_seen where load_key = $1',
    [loadKey],
  );
  return r.rows[0]?.n ?? 0;
}

/** Fresh statistics of `load_seen`, so the delete step's anti-join is planned as the hash join it should be. */
export async function analyzeSeen(client: LoaderClient): Promise<void> {
  await client.query('analyze load_seen');
}

// ---- crs_gone: the delete step's candidates ------------------------------------------------

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

/**
 * Closes the open export and file rejects of `day` whose line a complete load of the day
 * (`loadId`) did not quarantine again, in the caller's transaction: the export no longer holds
 * the line (the service corrected or dropped it), or holds it in a form that loads now. Either
 * way nothing is left to replay, and an open reject would keep `open_rejects` above 0 for ever.
 * A line the load read again is its open reject, whose last load is then this one (one open
 * reject per line, batch.ts). Returns how many closed.
 */
export async function closeGoneRejects(client: LoaderClient, day: string, loadId: string): Promise<number> {
  const r = await client.query(
    `update rejected_records r
        set replayed_at = now(), resolution = 'gone',
            replay_result = 'closed: not quarantined again by the complete load ' || $2::text || ' of '
              || $1::text || ' (the line left the export, or loads now)'
      where r.day = $1::date and r.replayed_at is null and r.source in ('export', 'file')
        -- One open reject per line: a line this load read again is that reject, its last load this one.
        and r.last_load_id <> $2`,
    [day, loadId],
  );
  return r.rowCount ?? 0;
}

// ---- held_deletes against what later loads see ------------------------------------------------

/** Whether any delete is held. */
export async function anyHeld(pool: pg.Pool): Promise<boolean> {
  const r = await pool.query<{ held: boolean }>('select exists (select 1 from held_deletes) as held');
  return r.rows[0]?.held === true;
}

/** What a load tells the held deletes at its finalize (src/ingest/finalize/finalize.ts `settleHeld`). */
export interface HeldSeenBy {
  /** The load's key (`load_seen`, `load_day_counts`). */
  loadKey: string;
  /** The load's run: held ids of its own run are the ones its delete step just decided. */
  runId: string;
  /** Whether `load_seen` holds every id the load saw: else it releases none. */
  seen: boolean;
  /** Days of which it quarantined a line whose id cannot be read. */
  unreadableDays: string[];
  /** It quarantined a line whose id and day cannot be read: it may be of any held day. */
  unreadableAnyDay: boolean;
  /** It quarantined a line with no readable day (of the days it read unnoted: every held day). */
  dayless: boolean;
}

/** The held days a load's finalize settles, each list by why. */
export interface HeldSettled {
  /** The day of each held row the load saw (it left the hold). */
  released: string[];
  /** Held days (of other runs) of which the load quarantined a line whose id cannot be read. */
  unreadable: string[];
  /** Held days (of other runs) the load read rows of without noting their ids (none when it noted them). */
  unnoted: string[];
}

/**
 * In the caller's transaction, the held set against one load at its finalize: the held ids it saw
 * leave the hold, and the held days it may have read an id of without proving which are found.
 */
export async function settleHeldSeen(client: LoaderClient, l: HeldSeenBy): Promise<HeldSettled> {
  const released = await releaseSeenHeld(client, l.loadKey, l.seen);
  const unreadable = await heldDaysOf(client, l.runId, l.unreadableAnyDay, l.unreadableDays);
  const unnoted = l.seen ? [] : await heldDaysRead(client, l.loadKey, l.runId, l.dayless);
  return { released, unreadable, unnoted };
}

/**
 * The held ids `load_seen` holds under `loadKey` leave the hold (none unless `seen`: the load
 * noted its ids); returns the day of each released row.
 */
async function releaseSeenHeld(client: LoaderClient, loadKey: string, seen: boolean): Promise<string[]> {
  const released = await client.query<{ day: string }>(
    `delete from held_deletes h
       where $2 and exists (select 1 from load_seen s where s.load_key = $1 and s.message_id = h.message_id)
       returning h.day::text as day`,
    [loadKey, seen],
  );
  return released.rows.map((r) => r.day);
}

/** Held days, of loads other than `runId`, that are `days` (or any day when `anyDay`). */
async function heldDaysOf(
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
async function heldDaysRead(
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
