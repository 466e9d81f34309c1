import type { Executor } from './types.ts';

/**
 * Writes to `threads` outside the enrichment itself (whose reads and writes are in
 * src/enrich/store.ts and write-pages.ts; the loader queues threads in its finalize).
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
