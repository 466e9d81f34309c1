import type { LoaderClient } from '../ledger.ts';

/**
 * The load lock: a session advisory lock on a load's key (in its schema), held by the load's
 * first connection for as long as the load runs (src/ingest/merge/load.ts), so that two
 * processes never run the same load at once. `removeDeadSpills` (delete-guard.ts) reads the same locks to
 * tell a running load from a dead one.
 */

/** The name of a load's lock, less its load key (hashed into the advisory lock's key). */
export function loadLockPrefix(schema: string): string {
  return `crs-sync:load:${schema}:`;
}

/** Takes the lock named `lockKey` if no other session holds it; whether it was taken. */
export async function tryLoadLock(client: LoaderClient, lockKey: string): Promise<boolean> {
  const r = await client.query<{ ok: boolean }>('select pg_try_advisory_lock(hashtext($1)) as ok', [lockKey]);
  return r.rows[0]?.ok === true;
}

/** Releases the lock named `lockKey` (the caller releases the connection after it). */
export async function unlockLoad(client: LoaderClient, lockKey: string): Promise<void> {
  await client.query('select pg_advisory_unlock(hashtext($1))', [lockKey]);
}
