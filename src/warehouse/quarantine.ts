import { sql } from 'kysely';
import type { Executor, RejectedRecord, RejectSource } from './types.ts';

/**
 * The quarantine (`rejected_records`): lines and entries that broke the record contract. An export
 * or file line is one open reject however many loads read it (its source, day and digest: the
 * loader's upsert, src/warehouse/load/batch.ts), with how many loads read it and the last one.
 */

/** Which rejects a command is about; every field narrows the selection. */
export interface RejectFilter {
  ids?: number[];
  source?: RejectSource;
  errorCode?: string;
  /** Rejects this load read first or last. */
  loadId?: string;
  limit?: number;
}

/**
 * The rejects that match `filter`, newest first (or oldest first, the order a replay loads them
 * in), at most `filter.limit` (default 50); open ones only (not yet replayed) unless
 * `includeReplayed`.
 */
export async function listRejects(
  db: Executor,
  filter: RejectFilter,
  opts: { includeReplayed?: boolean; oldestFirst?: boolean } = {},
): Promise<RejectedRecord[]> {
  let q = db
    .selectFrom('rejected_records')
    .selectAll()
    .orderBy('id', opts.oldestFirst ? 'asc' : 'desc')
    .limit(filter.limit ?? 50);
  if (!opts.includeReplayed) q = q.where('replayed_at', 'is', null);
  if (filter.ids && filter.ids.length > 0) q = q.where('id', 'in', filter.ids.map(String));
  if (filter.source) q = q.where('source', '=', filter.source);
  if (filter.errorCode) q = q.where('error_code', '=', filter.errorCode);
  if (filter.loadId) {
    const id = filter.loadId;
    q = q.where((eb) => eb.or([eb('_load_id', '=', id), eb('last_load_id', '=', id)]));
  }
  return q.execute();
}

/** Notes why rejects were not replayed; they stay open. */
export async function noteReplayResult(db: Executor, ids: readonly string[], result: string): Promise<void> {
  if (ids.length === 0) return;
  await db.updateTable('rejected_records').set({ replay_result: result }).where('id', 'in', ids).execute();
}

/** Marks rejects replayed, with how (loaded again, thread re-queued). */
export async function markReplayed(db: Executor, ids: readonly string[], result: string): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('rejected_records')
    .set({ replayed_at: new Date(), replay_result: result, resolution: 'replayed' })
    .where('id', 'in', ids)
    .execute();
}

/** Why each line of a load was rejected, by line number ("code: detail"). */
export async function rejectsByLine(db: Executor, loadId: string): Promise<Map<number | null, string>> {
  const rows = await db
    .selectFrom('rejected_records')
    .select(['line_no', 'error_code', 'error_detail'])
    .where('_load_id', '=', loadId)
    .execute();
  return new Map(rows.map((a) => [a.line_no, `${a.error_code}: ${a.error_detail}`]));
}

/**
 * The outcome of a replay load, one reject at a time in the replay's transaction: replayed, or
 * left open with the new reason and the replay counted as a load that read it (`times_seen`, the
 * last load). The replay load's own rejects are dropped: a line that fails again keeps its
 * quarantine row, not a second one.
 */
export async function recordReplay(
  trx: Executor,
  replayLoadId: string,
  outcomes: readonly { id: string; failedAgain: string | undefined }[],
): Promise<void> {
  for (const o of outcomes) {
    await trx
      .updateTable('rejected_records')
      .set(
        o.failedAgain === undefined
          ? {
              replayed_at: new Date(),
              replay_result: `loaded by ${replayLoadId}`,
              resolution: 'replayed' as const,
            }
          : {
              replay_result: `still rejected: ${o.failedAgain}`.slice(0, 1000),
              times_seen: sql<number>`times_seen + (last_load_id <> ${replayLoadId})::int`,
              last_load_id: replayLoadId,
              last_seen_at: sql<Date>`now()`,
            },
      )
      .where('id', '=', o.id)
      .execute();
  }
  await trx.deleteFrom('rejected_records').where('_load_id', '=', replayLoadId).execute();
}

export interface DismissResult {
  /** Closed now. */
  dismissed: string[];
  /** Closed before (replayed, dismissed or gone): left as they were. */
  alreadyClosed: string[];
  /** No reject has these ids. */
  unknown: string[];
}

/**
 * Closes open rejects by hand (`crs-sync rejects dismiss`): they leave every count of open rejects
 * (and the `open_rejects` alert condition) and keep their row, with `resolution` `dismissed` and
 * the reason in `replay_result`.
 */
export async function dismissRejects(
  db: Executor,
  ids: readonly string[],
  reason: string,
): Promise<DismissResult> {
  if (ids.length === 0) return { dismissed: [], alreadyClosed: [], unknown: [] };
  const closed = await db
    .updateTable('rejected_records')
    .set({
      replayed_at: new Date(),
      replay_result: `dismissed: ${reason}`.slice(0, 1000),
      resolution: 'dismissed',
    })
    .where('id', 'in', [...ids])
    .where('replayed_at', 'is', null)
    .returning('id')
    .execute();
  const known = await db
    .selectFrom('rejected_records')
    .select('id')
    .where('id', 'in', [...ids])
    .execute();
  const done = new Set(closed.map((r) => String(r.id)));
  const exists = new Set(known.map((r) => String(r.id)));
  return {
    dismissed: ids.filter((id) => done.has(id)),
    alreadyClosed: ids.filter((id) => exists.has(id) && !done.has(id)),
    unknown: ids.filter((id) => !exists.has(id)),
  };
}
