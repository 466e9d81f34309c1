import type pg from 'pg';
import { formatDuration, formatNumber, renderTable } from '../common/table.ts';

/** The warehouse's figures after the demo's backfill, read back from the tables and views. */
export interface WarehouseFigures {
  daysComplete: number;
  daysFailed: number;
  /** Live export rows (analytics_messages without _deleted_at). */
  rows: number;
  rowsDeleted: number;
  threads: Record<string, number>;
  threadsTotal: number;
  threadMessages: number;
  citations: number;
  artifacts: number;
  /** Open (not replayed) rejects by source. */
  rejects: Record<string, number>;
  rejectsTotal: number;
}

export interface BiResults {
  topDays: {
    message_date: string;
    messages: number;
    active_users: number;
    active_threads: number;
    cancelled: number;
    avg_response_chars: number | null;
  }[];
  topSources: { citation_type: string; name: string; citations: number; threads: number }[];
  topUsers: { user_id: string; days_active: number; messages: number; threads: number }[];
  health: {
    watermark: string | null;
    lag_days: number | null;
    complete_days: number;
    failed_days: number;
    last_run_status: string | null;
    open_rejects: number;
    threads_pending: number;
  };
}

const n = (v: unknown): number => Number(v ?? 0);

export async function readFigures(pool: pg.Pool): Promise<WarehouseFigures> {
  const one = async (sql: string) => (await pool.query(sql)).rows[0] as Record<string, unknown>;
  const days = await one(
    `select count(*) filter (where status = 'complete') as complete, count(*) filter (where status = 'failed') as failed from sync_days`,
  );
  const rows = await one(
    'select count(*) filter (where _deleted_at is null) as live, count(*) filter (where _deleted_at is not null) as deleted from analytics_messages',
  );
  const threads = await pool.query<{ enrich_status: string; n: number }>(
    'select enrich_status, count(*)::int as n from threads group by 1 order by 1',
  );
  const counts = await one(
    'select (select count(*) from thread_messages) as tm, (select count(*) from citations) as c, (select count(*) from artifacts) as a',
  );
  const rejects = await pool.query<{ source: string; n: number }>(
    'select source, count(*)::int as n from rejected_records where replayed_at is null group by 1 order by 1',
  );
  const byStatus = Object.fromEntries(threads.rows.map((r) => [r.enrich_status, n(r.n)]));
  const bySource = Object.fromEntries(rejects.rows.map((r) => [r.source, n(r.n)]));
  return {
    daysComplete: n(days.complete),
    daysFailed: n(days.failed),
    rows: n(rows.live),
    rowsDeleted: n(rows.deleted),
    threads: byStatus,
    threadsTotal: Object.values(byStatus).reduce((s, v) => s + v, 0),
    threadMessages: n(counts.tm),
    citations: n(counts.c),
    artifacts: n(counts.a),
    rejects: bySource,
    rejectsTotal: Object.values(bySource).reduce((s, v) => s + v, 0),
  };
}

/** A few questions a dashboard would ask, answered from the BI views. */
export async function readBi(pool: pg.Pool): Promise<BiResults> {
  const topDays = await pool.query(
    `select message_date::text as message_date, messages::int, active_users::int, active_threads::int,
            cancelled::int, round(avg_response_chars)::int as avg_response_chars
     from daily_usage order by messages desc, message_date desc limit 5`,
  );
  const topSources = await pool.query(
    `select citation_type, name, citations::int, threads::int
     from citation_sources order by citations desc, citation_type, name limit 5`,
  );
  const topUsers = await pool.query(
    `select user_id::text as user_id, days_active::int, messages::int, threads::int
     from user_activity order by messages desc, user_id limit 5`,
  );
  const health = await pool.query(
    `select watermark::text as watermark, lag_days, complete_days::int, failed_days::int, last_run_status,
            open_rejects::int, threads_pending::int
     from sync_health`,
  );
  return {
    topDays: topDays.rows,
    topSources: topSources.rows,
    topUsers: topUsers.rows,
    health: health.rows[0],
  };
}

export interface DemoSummary {
  ok: boolean;
  window: { from: string; to: string; days: number };
  elapsedMs: number;
  simulator: { seed: number; recordsPerDay: number };
  warehouse: { url: string; schema: string; embedded: boolean };
  temporal: { address: string; namespace: string; taskQueue: string; uiUrl: string | null; own: boolean };
  backfill: {
    workflowId: string;
    loadId: string;
    rowsRead: number;
    inserted: number;
    updated: number;
    unchanged: number;
    rejected: number;
    failedDays: string[];
  };
  schedule: { id: string; action: 'created' | 'updated'; nextRun: string | null; removedAtExit: boolean };
  figures: WarehouseFigures;
  bi: BiResults;
}

function keyValues(rows: [string, string][]): string {
  const w = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n');
}

function list(rec: Record<string, number>): string {
  const parts = Object.entries(rec).map(([k, v]) => `${k} ${formatNumber(v)}`);
  return parts.length > 0 ? parts.join(', ') : 'none';
}

export function renderSummary(s: DemoSummary): string {
  const f = s.figures;
  const b = s.backfill;
  const out: string[] = [];
  out.push(
    '',
    `crs-sync demo ${s.ok ? 'finished' : 'finished with failures'} in ${formatDuration(s.elapsedMs)}`,
  );
  out.push(
    keyValues([
      ['window', `${s.window.from} .. ${s.window.to} (${s.window.days} days)`],
      ['days loaded', `${f.daysComplete} complete, ${f.daysFailed} failed`],
      [
        'rows',
        `${formatNumber(f.rows)} live export rows (${formatNumber(b.inserted)} inserted, ` +
          `${formatNumber(b.updated)} updated, ${formatNumber(b.unchanged)} unchanged by this run)`,
      ],
      ['threads', `${formatNumber(f.threadsTotal)} (${list(f.threads)})`],
      ['thread messages', formatNumber(f.threadMessages)],
      ['citations', formatNumber(f.citations)],
      ['artifacts', formatNumber(f.artifacts)],
      ['rejects', `${formatNumber(f.rejectsTotal)} open (${list(f.rejects)})`],
      [
        'schedule',
        `${s.schedule.id} ${s.schedule.action}, next run ${s.schedule.nextRun ?? '-'}` +
          (s.schedule.removedAtExit ? ' (removed at exit: not the demo’s own Temporal)' : ''),
      ],
      ['elapsed', formatDuration(s.elapsedMs)],
    ]),
  );
  if (b.failedDays.length > 0) out.push(`failed days: ${b.failedDays.join(', ')}`);
  const bi = s.bi;
  out.push('', 'Busiest days (daily_usage):');
  out.push(
    renderTable(
      ['day', 'messages', 'users', 'threads', 'cancelled', 'avg response chars'],
      bi.topDays.map((d) => [
        d.message_date,
        d.messages,
        d.active_users,
        d.active_threads,
        d.cancelled,
        d.avg_response_chars ?? '-',
      ]),
    ),
  );
  out.push('', 'Top citation sources (citation_sources):');
  out.push(
    renderTable(
      ['type', 'name', 'citations', 'threads'],
      bi.topSources.map((c) => [c.citation_type, c.name, c.citations, c.threads]),
    ),
  );
  out.push('', 'Most active users (user_activity):');
  out.push(
    renderTable(
      ['user', 'days active', 'messages', 'threads'],
      bi.topUsers.map((u) => [u.user_id, u.days_active, u.messages, u.threads]),
    ),
  );
  const h = bi.health;
  out.push('', 'Sync health (sync_health):');
  out.push(
    renderTable(
      ['watermark', 'lag days', 'complete', 'failed', 'last run', 'open rejects', 'threads pending'],
      [
        [
          h.watermark ?? '-',
          h.lag_days ?? '-',
          h.complete_days,
          h.failed_days,
          h.last_run_status ?? '-',
          h.open_rejects,
          h.threads_pending,
        ],
      ],
    ),
  );
  return `${out.join('\n')}\n`;
}
