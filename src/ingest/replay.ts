import { Readable } from 'node:stream';
import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import type { Warehouse } from '../warehouse/db.ts';
import { closeRun, startRun } from '../warehouse/runs.ts';
import type { RejectSource } from '../warehouse/types.ts';
import { runLoad } from './load.ts';

/**
 * Replays quarantined rows once their cause is fixed (a parser change, a relaxed contract).
 *
 * Export and file lines go through the same loader again as a `replay` run, from their exact
 * bytes. A line that loads is marked replayed; one that fails again stays open with the new
 * reason in replay_result (no second quarantine row). A line kept only as a prefix (over the
 * line limit) cannot be replayed. History and artifact rejects re-queue their thread and rewind
 * its stored history position to the rejected entry, so enrichment reads it again.
 */
export interface ReplayFilter {
  ids?: number[];
  source?: RejectSource;
  errorCode?: string;
  loadId?: string;
  limit?: number;
}

export interface ReplayResult {
  replayLoadId: string | null;
  selected: number;
  loaded: number;
  stillRejected: number;
  notReplayable: number;
  threadsRequeued: number;
}

export async function replayRejects(
  w: Warehouse,
  config: Config,
  log: Logger,
  filter: ReplayFilter,
  opts: { dryRun?: boolean } = {},
): Promise<ReplayResult> {
  let q = w.db
    .selectFrom('rejected_records')
    .select(['id', 'source', 'error_code', 'raw', 'raw_bytes', 'thread_id', 'line_no'])
    .where('replayed_at', 'is', null)
    .orderBy('id')
    .limit(filter.limit ?? 100_000);
  if (filter.ids && filter.ids.length > 0) q = q.where('id', 'in', filter.ids.map(String));
  if (filter.source) q = q.where('source', '=', filter.source);
  if (filter.errorCode) q = q.where('error_code', '=', filter.errorCode);
  if (filter.loadId) q = q.where('_load_id', '=', filter.loadId);
  const rows = await q.execute();

  const lines = rows.filter(
    (r) => (r.source === 'export' || r.source === 'file') && r.error_code !== 'line_too_long',
  );
  const prefixOnly = rows.filter((r) => r.error_code === 'line_too_long');
  const threadRows = rows.filter((r) => (r.source === 'history' || r.source === 'artifact') && r.thread_id);
  const result: ReplayResult = {
    replayLoadId: null,
    selected: rows.length,
    loaded: 0,
    stillRejected: 0,
    notReplayable: prefixOnly.length,
    threadsRequeued: 0,
  };
  if (opts.dryRun) return result;

  if (prefixOnly.length > 0) {
    await w.db
      .updateTable('rejected_records')
      .set({ replay_result: 'not replayable: only a prefix of the over-long line was kept' })
      .where(
        'id',
        'in',
        prefixOnly.map((r) => r.id),
      )
      .execute();
  }

  if (lines.length > 0) {
    const loadId = `replay-${new Date()
      .toISOString()
      .replace(/[-:.TZ]/g, '')
      .slice(0, 14)}-${rows[0]!.id}`;
    result.replayLoadId = loadId;
    const body = Buffer.concat(
      lines.flatMap((r) => [
        r.raw_bytes ?? Buffer.from(r.raw.replaceAll('\n', ' '), 'utf8'),
        Buffer.from('\n'),
      ]),
    );
    await startRun(w.db, { loadId, kind: 'replay', source: 'rejected_records' });
    const summary = await runLoad({
      warehouse: w,
      log,
      loadId,
      loadKey: loadId,
      source: 'file',
      sourceName: 'replay',
      open: async () => Readable.from([body]),
      batchSize: config.batchSize,
      parts: 1,
      maxLineBytes: config.maxLineBytes,
    });
    const again = await w.db
      .selectFrom('rejected_records')
      .select(['line_no', 'error_code', 'error_detail'])
      .where('_load_id', '=', loadId)
      .execute();
    const failedAgain = new Map(again.map((a) => [a.line_no, `${a.error_code}: ${a.error_detail}`]));
    await w.db.transaction().execute(async (trx) => {
      for (let i = 0; i < lines.length; i++) {
        const why = failedAgain.get(i + 1);
        await trx
          .updateTable('rejected_records')
          .set(
            why === undefined
              ? { replayed_at: new Date(), replay_result: `loaded by ${loadId}` }
              : { replay_result: `still rejected: ${why}`.slice(0, 1000) },
          )
          .where('id', '=', lines[i]!.id)
          .execute();
      }
      await trx.deleteFrom('rejected_records').where('_load_id', '=', loadId).execute();
    });
    result.stillRejected = failedAgain.size;
    result.loaded = lines.length - failedAgain.size;
    // No complete days: a replay deletes nothing, so its deleted count is 0.
    await closeRun(w.db, loadId, 'succeeded', summary);
  }

  if (threadRows.length > 0) {
    const rewind = new Map<string, number>();
    for (const r of threadRows) {
      const pos = r.source === 'history' && r.line_no !== null ? r.line_no : Number.POSITIVE_INFINITY;
      rewind.set(r.thread_id!, Math.min(rewind.get(r.thread_id!) ?? Number.POSITIVE_INFINITY, pos));
    }
    await w.db.transaction().execute(async (trx) => {
      for (const [threadId, pos] of rewind) {
        await trx
          .updateTable('threads')
          .set((eb) => ({
            enrich_status: 'pending',
            enrich_requested_at: new Date(),
            ...(Number.isFinite(pos)
              ? { history_count: eb.fn('least', ['history_count', eb.val(pos)]) }
              : {}),
          }))
          .where('thread_id', '=', threadId)
          .where('enrich_status', '<>', 'deleted')
          .execute();
      }
      await trx
        .updateTable('rejected_records')
        .set({ replayed_at: new Date(), replay_result: 'thread re-queued for enrichment' })
        .where(
          'id',
          'in',
          threadRows.map((r) => r.id),
        )
        .execute();
    });
    result.threadsRequeued = rewind.size;
  }
  return result;
}
