import type { Executor, RejectedRecord, RejectSource } from './types.ts';

/** The quarantine (`rejected_records`): lines and entries that broke the record contract. */

/** Which rejects a command is about; every field narrows the selection. */
export interface RejectFilter {
  ids?: number[];
  source?: RejectSource;
  errorCode?: string;
  loadId?: string;
  limit?: number;
}

/**
 * The rejects that match `filter`, newest first, at most `filter.limit` (default 50); open ones
 * only (not yet replayed) unless `includeReplayed`.
 */
export async function listRejects(
  db: Executor,
  filter: RejectFilter,
  opts: { includeReplayed?: boolean } = {},
): Promise<RejectedRecord[]> {
  let q = db
    .selectFrom('rejected_records')
    .selectAll()
    .orderBy('id', 'desc')
    .limit(filter.limit ?? 50);
  if (!opts.includeReplayed) q = q.where('replayed_at', 'is', null);
  if (filter.ids) q = q.where('id', 'in', filter.ids.map(String));
  if (filter.source) q = q.where('source', '=', filter.source);
  if (filter.errorCode) q = q.where('error_code', '=', filter.errorCode);
  if (filter.loadId) q = q.where('_load_id', '=', filter.loadId);
  return q.execute();
}
