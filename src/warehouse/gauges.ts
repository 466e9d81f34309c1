import { sql } from 'kysely';
import { getWatermark } from './ledger.ts';
import { readOpenDayPull } from './read/freshness.ts';
import type { Executor } from './types.ts';

/**
 * What the worker's /metrics reads from the warehouse when scraped. Each query is bounded by the
 * size of something small (the ledger's days, the reject codes) or by an index (the pending
 * threads: threads_status_requested_idx); the caller runs them on a connection of its own with a
 * short statement timeout, so a slow warehouse costs a scrape its gauges, never a load.
 */
export interface WarehouseGauges {
  /** Days of the ledger by status. */
  days: Partial<Record<string, number>>;
  /** Rows whose soft-delete the guard holds for review. */
  deletesHeld: number;
  /** Open (not replayed) quarantined lines, by source and reject code. */
  quarantineOpen: { source: string; code: string; lines: number }[];
  /** Threads waiting for enrichment, and how long the oldest of them has waited (0: none). */
  enrichBacklog: number;
  enrichOldestPendingSeconds: number;
  /** From the end of the watermark day (the newest of the complete days without a gap) to now; null: none. */
  exportAgeSeconds: number | null;
  /**
   * Since the open day's last intraday pull finished (the newest day pulled intraday and not
   * complete since); null: none. Not a freshness of the export, which counts complete days only.
   */
  openDayPullAgeSeconds: number | null;
  /**
   * The highest share of its lines read that a day's last load rejected, over the ledger's days
   * (0: none rejected): what the quarantine_spike alert compares with CRS_ALERT_QUARANTINE_SHARE.
   */
  dayRejectedShareMax: number;
  /** How long from now the shared request budget stays paused by a Retry-After (the longest; 0: none). */
  budgetPausedSeconds: number;
}

const DAY_MS = 86_400_000;

export async function readWarehouseGauges(db: Executor, now = new Date()): Promise<WarehouseGauges> {
  const days = await db
    .selectFrom('sync_days')
    .select([
      'status',
      (eb) => eb.fn.countAll<number>().as('n'),
      (eb) => eb.fn.sum<number>('deletes_held').as('held'),
    ])
    .groupBy('status')
    .execute();
  const rejects = await db
    .selectFrom('rejected_records')
    .select(['source', 'error_code', (eb) => eb.fn.countAll<number>().as('n')])
    .where('replayed_at', 'is', null)
    .groupBy(['source', 'error_code'])
    .execute();
  const backlog = await db
    .selectFrom('threads')
    .select([(eb) => eb.fn.countAll<number>().as('n'), (eb) => eb.fn.min('enrich_requested_at').as('oldest')])
    .where('enrich_status', '=', 'pending')
    .executeTakeFirstOrThrow();
  // The measures of quarantine_spike and budget_starved, as src/alerts/checks.ts reads them.
  const alertMeasures = await sql<{ share: number | null; paused: number | null }>`
    select (select max(rows_rejected::float8 / rows_read) from sync_days where rows_read > 0) as share,
           (select max(extract(epoch from paused_until - clock_timestamp()))::float8 from rate_budget) as paused`.execute(
    db,
  );
  const watermark = await getWatermark(db);
  const pull = await readOpenDayPull(db, now);
  const oldest = backlog.oldest ? new Date(backlog.oldest as Date | string).getTime() : null;
  return {
    days: Object.fromEntries(days.map((d) => [d.status, Number(d.n)])),
    deletesHeld: days.reduce((sum, d) => sum + Number(d.held ?? 0), 0),
    quarantineOpen: rejects.map((r) => ({ source: r.source, code: r.error_code, lines: Number(r.n) })),
    enrichBacklog: Number(backlog.n),
    enrichOldestPendingSeconds: oldest === null ? 0 : Math.max(0, (now.getTime() - oldest) / 1000),
    // The watermark day ends at the next midnight UTC: data is as fresh as that moment.
    exportAgeSeconds:
      watermark === null ? null : Math.max(0, (now.getTime() - (Date.parse(watermark) + DAY_MS)) / 1000),
    openDayPullAgeSeconds: pull?.age_seconds ?? null,
    dayRejectedShareMax: Number(alertMeasures.rows[0]?.share ?? 0),
    budgetPausedSeconds: Math.max(0, Number(alertMeasures.rows[0]?.paused ?? 0)),
  };
}
