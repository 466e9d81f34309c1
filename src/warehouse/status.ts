import { type Kysely, sql } from 'kysely';
import { getWatermark, shiftDay, utcDay } from './ledger.ts';
import type { Database } from './types.ts';

/** What `crs-sync status` shows: the state of the ledger, the runs, the quarantine and enrichment. */
export interface WarehouseStatus {
  watermark: string | null;
  /** Whole days between the watermark and yesterday (UTC); null with no watermark. */
  lagDays: number | null;
  days: Record<string, number>;
  failedDays: { day: string; attempts: number; lastError: string | null }[];
  recentRuns: {
    loadId: string;
    kind: string;
    status: string;
    window: string | null;
    rowsRead: number;
    inserted: number;
    updated: number;
    rejected: number;
    deleted: number;
    startedAt: string;
    finishedAt: string | null;
    error: string | null;
  }[];
  rejects: { source: string; errorCode: string; open: number; replayed: number }[];
  threads: Record<string, number>;
  messages: { live: number; deleted: number };
}

export async function readStatus(db: Kysely<Database>, now = new Date()): Promise<WarehouseStatus> {
  const watermark = await getWatermark(db);
  const yesterday = shiftDay(utcDay(now), -1);
  const lagDays =
    watermark === null
      ? null
      : Math.max(0, Math.round((Date.parse(yesterday) - Date.parse(watermark)) / 86_400_000));
  const days = await db
    .selectFrom('sync_days')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy('status')
    .execute();
  const failed = await db
    .selectFrom('sync_days')
    .select(['day', 'attempts', 'last_error'])
    .where('status', '=', 'failed')
    .orderBy('day')
    .limit(20)
    .execute();
  const runs = await db.selectFrom('sync_runs').selectAll().orderBy('started_at', 'desc').limit(10).execute();
  const rejects = await db
    .selectFrom('rejected_records')
    .select([
      'source',
      'error_code',
      sql<number>`count(*) filter (where replayed_at is null)`.as('open'),
      sql<number>`count(*) filter (where replayed_at is not null)`.as('replayed'),
    ])
    .groupBy(['source', 'error_code'])
    .orderBy('source')
    .orderBy('error_code')
    .execute();
  const threads = await db
    .selectFrom('threads')
    .select(['enrich_status', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy('enrich_status')
    .execute();
  const msgs = await db
    .selectFrom('analytics_messages')
    .select([
      sql<number>`count(*) filter (where _deleted_at is null)`.as('live'),
      sql<number>`count(*) filter (where _deleted_at is not null)`.as('deleted'),
    ])
    .executeTakeFirstOrThrow();
  return {
    watermark,
    lagDays,
    days: Object.fromEntries(days.map((d) => [d.status, Number(d.n)])),
    failedDays: failed.map((f) => ({ day: f.day, attempts: f.attempts, lastError: f.last_error })),
    recentRuns: runs.map((r) => ({
      loadId: r.load_id,
      kind: r.kind,
      status: r.status,
      window: r.window_start ? `${r.window_start}..${r.window_end}` : null,
      rowsRead: r.rows_read,
      inserted: r.rows_inserted,
      updated: r.rows_updated,
      rejected: r.rows_rejected,
      deleted: r.rows_deleted,
      startedAt: r.started_at.toISOString(),
      finishedAt: r.finished_at ? r.finished_at.toISOString() : null,
      error: r.error,
    })),
    rejects: rejects.map((r) => ({
      source: r.source,
      errorCode: r.error_code,
      open: Number(r.open),
      replayed: Number(r.replayed),
    })),
    threads: Object.fromEntries(threads.map((t) => [t.enrich_status, Number(t.n)])),
    messages: { live: Number(msgs.live), deleted: Number(msgs.deleted) },
  };
}
