import type pg from 'pg';
import type { LoaderClient } from '../ledger.ts';
import { type CopyInput, copyIn } from './batch.ts';

/**
 * `load_seen`: the message ids a load saw (src/ingest/merge/seen-spill.ts spills them in chunks of
 * binary COPY tuples, load key and 16-byte uuid), for the delete step's anti-join (deletes.ts)
 * and the held deletes (held.ts). UNLOGGED: a crash empties it, which the finalize checks
 * (`countSeen`) before it trusts it.
 */

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
