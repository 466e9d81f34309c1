import { type Kysely, sql } from 'kysely';
import type { Database, EnrichStatus } from './types.ts';

/**
 * The enrichment's own reads and writes of `threads` (src/enrich): which threads are pending,
 * where each one's history stands, a failed attempt, the thread list's names and re-queues. The
 * pages themselves are written by enrich-pages.ts.
 */

export interface ThreadState {
  thread_id: string;
  enrich_status: EnrichStatus;
  history_count: number;
  enrich_attempts: number;
  /**
   * When the thread was last queued, as Postgres text (full microsecond precision, which a JS
   * Date would lose); a different value at the end means it was queued again meanwhile.
   */
  requested_at: string | null;
  /**
   * The entry stored at position history_count − 1, which the next read asks for again to see
   * whether the history changed upstream: its message_id, or, when that entry was quarantined,
   * its raw text as quarantined. Both null when nothing is stored there.
   */
  tail_message_id: string | null;
  tail_rejected_raw: string | null;
  /**
   * The highest position a stored message of the thread holds (null: none). A page that starts
   * above it, outside a re-read, cannot find anything stale, and skips looking.
   */
  max_position: number | null;
}

export async function listPendingThreads(
  db: Kysely<Database>,
  input: { afterThreadId: string | null; limit: number },
): Promise<string[]> {
  let q = db
    .selectFrom('threads')
    .select('thread_id')
    .where('enrich_status', '=', 'pending')
    .orderBy('thread_id')
    .limit(input.limit);
  if (input.afterThreadId) q = q.where('thread_id', '>', input.afterThreadId);
  return (await q.execute()).map((r) => r.thread_id);
}

export async function readThreadStates(
  db: Kysely<Database>,
  ids: readonly string[],
): Promise<Map<string, ThreadState>> {
  if (ids.length === 0) return new Map();
  // The quarantine is looked at only when no message holds the tail position: rare, and
  // rejected_records has no index for it.
  const r = await sql<ThreadState>`
    select t.thread_id, t.enrich_status, t.history_count, t.enrich_attempts,
           t.enrich_requested_at::text as requested_at, m.message_id::text as tail_message_id,
           case when t.history_count > 0 and m.message_id is null then (
             select r.raw from rejected_records r
             where r.source = 'history' and r.source_name = 'thread/' || t.thread_id::text
               and r.line_no = t.history_count - 1
             order by r.id desc limit 1) end as tail_rejected_raw,
           (select max(x.position) from thread_messages x where x.thread_id = t.thread_id) as max_position
    from threads t
    left join lateral (
      select x.message_id from thread_messages x
      where x.thread_id = t.thread_id and x.position = t.history_count - 1
      limit 1) m on true
    where t.thread_id = any(${ids as string[]}::uuid[])`.execute(db);
  return new Map(r.rows.map((row) => [row.thread_id, row]));
}

/**
 * A failed attempt at a thread: the error kept and, when `counts`, counted; after `maxAttempts`
 * counted failures the thread is 'failed' (no longer picked up until a load queues it again),
 * before that it stays 'pending'.
 */
export async function failThread(
  db: Kysely<Database>,
  threadId: string,
  f: { error: string; maxAttempts: number; permanent: boolean; counts: boolean },
): Promise<EnrichStatus> {
  const step = f.counts ? 1 : 0;
  const row = await db
    .updateTable('threads')
    .set((eb) => ({
      enrich_attempts: eb('enrich_attempts', '+', step),
      last_error: f.error,
      enrich_status: f.permanent
        ? sql<EnrichStatus>`'failed'`
        : sql<EnrichStatus>`case when enrich_attempts + ${step} >= ${f.maxAttempts} then 'failed' else enrich_status end`,
    }))
    .where('thread_id', '=', threadId)
    .returning('enrich_status')
    .executeTakeFirst();
  return row?.enrich_status ?? 'failed';
}

/**
 * Names from the thread list, and re-queueing of threads whose history changed length since they
 * were enriched (the list's message_count differs from the stored history_count): grown, or
 * shortened upstream, which the next read detects and answers by re-reading the whole history.
 */
export async function applyThreadList(
  db: Kysely<Database>,
  entries: ReadonlyArray<{ thread_id: string; name: string | null; count: number | null }>,
): Promise<{ updated: number; requeued: number }> {
  if (entries.length === 0) return { updated: 0, requeued: 0 };
  const ids = entries.map((e) => e.thread_id);
  const names = entries.map((e) => e.name);
  const counts = entries.map((e) => e.count);
  const r = await sql<{ updated: number; requeued: number }>`
    with l as (
      select * from unnest(${ids}::uuid[], ${names}::text[], ${counts}::int[]) as l(thread_id, name, n)
    ), c as (
      select t.thread_id, coalesce(l.name, t.thread_name) as name,
             (t.enrich_status = 'done' and l.n <> t.history_count) as requeue
      from threads t join l on l.thread_id = t.thread_id
      where t.thread_name is distinct from coalesce(l.name, t.thread_name)
         or (t.enrich_status = 'done' and l.n <> t.history_count)
    ), u as (
      update threads t set
        thread_name = c.name,
        enrich_status = case when c.requeue then 'pending' else t.enrich_status end,
        enrich_requested_at = case when c.requeue then now() else t.enrich_requested_at end
      from c
      where t.thread_id = c.thread_id
      returning c.requeue::int as q
    )
    select count(*)::int as updated, coalesce(sum(q), 0)::int as requeued from u`.execute(db);
  return r.rows[0] ?? { updated: 0, requeued: 0 };
}

/**
 * Notes how a read of the thread list went (`thread_list_reads`, one row for the deployment):
 * `error` undefined for a read that worked, which also ends a run of failures. Read by
 * `crs-sync status` and the `enrichment_stalled` alert (read/thread-list.ts).
 */
export async function recordThreadListRead(db: Kysely<Database>, error?: string): Promise<void> {
  if (error === undefined) {
    await sql`
      insert into thread_list_reads (last_ok_at) values (now())
      on conflict (one) do update set last_ok_at = now(), failures = 0, failing_since = null`.execute(db);
    return;
  }
  await sql`
    insert into thread_list_reads (last_failed_at, failing_since, failures, failures_total, last_error)
    values (now(), now(), 1, 1, ${error})
    on conflict (one) do update set
      last_failed_at = now(),
      failing_since = coalesce(thread_list_reads.failing_since, now()),
      failures = thread_list_reads.failures + 1,
      failures_total = thread_list_reads.failures_total + 1,
      last_error = excluded.last_error`.execute(db);
}
