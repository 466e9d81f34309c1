import type { LoaderClient } from './ledger.ts';
import type { Executor } from './types.ts';

/**
 * `threads` and the loader's `thread_queue`, outside the enrichment itself (whose reads and
 * writes of a thread's pages are in enrichment.ts and enrich-pages.ts).
 */

/**
 * Queues threads for enrichment again (deleted threads stay deleted). A finite position rewinds
 * the thread's stored history count to it, so enrichment reads its history again from there.
 */
export async function requeueThreads(db: Executor, rewind: ReadonlyMap<string, number>): Promise<void> {
  for (const [threadId, pos] of rewind) {
    await db
      .updateTable('threads')
      .set((eb) => ({
        enrich_status: 'pending',
        enrich_requested_at: new Date(),
        ...(Number.isFinite(pos) ? { history_count: eb.fn('least', ['history_count', eb.val(pos)]) } : {}),
      }))
      .where('thread_id', '=', threadId)
      .where('enrich_status', '<>', 'deleted')
      .execute();
  }
}

/**
 * Moves the whole thread queue (the loader's batches append to it) into `threads` as pending,
 * under the load id; deleted threads stay deleted. What a load that died before its finalize
 * left in the queue goes too, so no touched thread is forgotten.
 */
export async function drainThreadQueue(client: LoaderClient, loadId: string): Promise<void> {
  await client.query(
    `with q as (delete from thread_queue returning thread_id, user_id),
          d as (select distinct on (thread_id) thread_id, user_id from q order by thread_id, user_id nulls last)
     insert into threads (thread_id, user_id, enrich_status, enrich_requested_at, _load_id)
     select thread_id, user_id, 'pending', now(), $1 from d order by thread_id
     on conflict (thread_id) do update set
       enrich_status = case when threads.enrich_status = 'deleted' then 'deleted' else 'pending' end,
       enrich_requested_at = now(),
       user_id = coalesce(threads.user_id, excluded.user_id),
       _load_id = excluded._load_id`,
    [loadId],
  );
}

/**
 * The threads queued under a load id, locked in thread id order: the order in which
 * `drainThreadQueue` locks them too. A backfill finalizes several days at once under one load
 * id, each updating the totals of the same threads; updating them in the plan's order (heap or
 * join order) while another day's drain locks them by id deadlocks, and Postgres aborts a day's
 * finalize (its whole load then runs again). For a CTE of the totals' statements, `lk(thread_id)`;
 * `onlyIf`, a condition that must hold to lock (and then update) anything.
 */
export const lockLoadThreadsSql = (onlyIf = 'true') =>
  `select thread_id from threads where _load_id = $1 and ${onlyIf} order by thread_id for update`;

/**
 * Recomputes the aggregates (first and last message, count) of the threads a load queued, from
 * all their live rows; returns how many of them are pending enrichment.
 */
export async function refreshQueuedThreads(client: LoaderClient, loadId: string): Promise<number> {
  const r = await client.query<{ n: number }>(
    `with lk as (${lockLoadThreadsSql()}),
     a as (
       select m.thread_id, min(m.message_time) first_at, max(m.message_time) last_at, count(*) n
       from analytics_messages m
       where m._deleted_at is null and m.thread_id in (select thread_id from lk)
       group by m.thread_id)
     update threads t set first_message_at = a.first_at, last_message_at = a.last_at, message_count = a.n
     from a where t.thread_id = a.thread_id
     returning (t.enrich_status = 'pending')::int as n`,
    [loadId],
  );
  return r.rows.reduce((s, x) => s + x.n, 0);
}
