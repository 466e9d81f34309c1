import { formatDuration, formatNumber, renderTable } from '../common/table.ts';
import type { BiResults, WarehouseFigures } from '../warehouse/read/index.ts';

export type { BiResults, WarehouseFigures } from '../warehouse/read/index.ts';

export interface DemoSummary {
  ok: boolean;
  window: { from: string; to: string; days: number };
  elapsedMs: number;
  simulator: { seed: number; recordsPerDay: number };
  warehouse: { url: string; schema: string; embedded: boolean };
  temporal: { address: string; namespace: string; taskQueue: string; uiUrl: string | null; own: boolean };
  backfill: {
    workflowId: string;
    /** The backfill's run id, under the key `demo --json` has always printed it with. */
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
