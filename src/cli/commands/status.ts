import type { Command } from 'commander';
import { renderTable } from '../../common/table.ts';
import { terminalText } from '../../common/terminal-text.ts';
import {
  describeFreshness,
  readStatus,
  type ThreadListReads,
  type WarehouseStatus,
} from '../../warehouse/read/index.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';

export function registerStatus(program: Command): void {
  program
    .command('status')
    .summary('watermark, lag, days by status, recent runs, rejects, held deletes, enrichment')
    .description(
      'Shows the state of the warehouse: the watermark (last day of the unbroken run of complete\n' +
        'days) and the lag to yesterday (UTC), days by status and the failed ones, the last runs,\n' +
        'the quarantine by source and error code, the deletes held by the delete guard, the days whose\n' +
        'export was not known complete, threads by enrichment status and whether the thread list\n' +
        '(thread names, threads queued again when their history grew) could be read. Runs and days\n' +
        'still marked running with no sign of life for 14 minutes (terminated, worker gone) are shown\n' +
        'as abandoned; days whose load failed an attempt that Temporal retries are shown as retrying,\n' +
        'with the error, the attempt and when the next one runs. A day is failed only when its load\n' +
        'stopped retrying.',
    )
    .option('--json', 'print the status as JSON')
    .action(async (opts: { json?: boolean }) => {
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1, schema: 'current' });
      try {
        const s = await readStatus(wh.warehouse.db, undefined, ctx.config.freshnessSlaSeconds);
        process.stdout.write(
          opts.json ? `${JSON.stringify(s, null, 2)}\n` : `${formatStatus(s, wh.description)}\n`,
        );
      } finally {
        await wh.close();
      }
    });
}

/** The status as text: a summary, then each section that has rows, as a table. */
function formatStatus(s: WarehouseStatus, warehouse: string): string {
  const byKey = (o: Record<string, number>) =>
    Object.entries(o)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ') || '(none)';
  const out = [
    `warehouse   ${warehouse}`,
    `watermark   ${s.watermark ?? '(no complete day yet)'}${s.lagDays === null ? '' : `   lag ${s.lagDays} day(s)`}`,
    `freshness   ${describeFreshness(s.freshness)}`,
    `days        ${byKey(s.days)}`,
    `messages    ${s.messages.live.toLocaleString('en-US')} live, ${s.messages.deleted.toLocaleString('en-US')} marked deleted`,
    `threads     ${byKey(s.threads)}`,
    `thread list ${describeThreadList(s.threadList)}`,
    `budget      ${describeBudgets(s)}`,
  ].map(terminalText);
  for (const t of sections(s)) {
    if (t.rows.length > 0) out.push('', t.title, renderTable(t.head, t.rows));
  }
  return out.join('\n');
}

const utc = (iso: string) => iso.slice(0, 19).replace('T', ' ');

/** The thread list's reads in a line: what a failing one leaves undone, and its last error. */
function describeThreadList(t: ThreadListReads): string {
  if (t.failing) {
    return (
      `FAILING: ${t.failures} failed read(s) since ${utc(t.failingSince ?? '')} UTC, last ok ` +
      `${t.lastOkAt ? `${utc(t.lastOkAt)} UTC` : 'never'}; thread names are not updated and threads ` +
      `whose history grew are not queued again. Last error: ${(t.lastError ?? '').slice(0, 200)}`
    );
  }
  if (t.lastOkAt === null) return '(not read yet)';
  const total = t.failuresTotal > 0 ? ` (${t.failuresTotal} failed read(s) before)` : '';
  return `read ok ${utc(t.lastOkAt)} UTC${total}`;
}

/** The shared request budgets in a line: the limit in force, its use in the window, a pause. */
function describeBudgets(s: WarehouseStatus): string {
  if (s.budgets.length === 0)
    return '(no shared request budget used yet: CRS_SHARED_BUDGET_NAME=off, or no worker has called the service)';
  return s.budgets
    .map(
      (b) =>
        `${b.name}: ${b.limitPerSecond === null ? 'no limit asked yet' : `limit ${b.limitPerSecond} requests/s`}, ` +
        `${b.leasedInWindow} leased in the last ${(b.windowMs ?? 1000) / 1000} s` +
        (b.pausedSeconds > 0 ? `, paused ${b.pausedSeconds} s more (the service's Retry-After)` : '') +
        `, last lease ${utc(b.updatedAt)} UTC`,
    )
    .join('; ');
}

/**
 * The recent runs. Their `suppressed` lines (of users and threads `crs-sync forget` erased) get a
 * column only when one of them has some, as the import's summary shows them: most deployments
 * never erase anyone.
 */
function recentRunsSection(runs: WarehouseStatus['recentRuns']): {
  title: string;
  head: string[];
  rows: (string | number)[][];
} {
  const suppressed = runs.some((r) => r.suppressed > 0);
  return {
    title: 'Recent runs:',
    head: [
      'load id',
      'kind',
      'status',
      'window',
      'read',
      'inserted',
      'updated',
      'rejected',
      ...(suppressed ? ['suppressed'] : []),
      'deleted',
      'started (UTC)',
    ],
    rows: runs.map((r) => [
      r.loadId,
      r.kind,
      r.status,
      r.window ?? '',
      r.rowsRead,
      r.inserted,
      r.updated,
      r.rejected,
      ...(suppressed ? [r.suppressed] : []),
      r.deleted,
      utc(r.startedAt),
    ]),
  };
}

/** The tables of the status, in the order shown. Long: one entry per table, each its title, head and rows. */
function sections(s: WarehouseStatus): { title: string; head: string[]; rows: (string | number)[][] }[] {
  return [
    {
      title: 'Failed days (their load stopped retrying; the next sync loads them again):',
      head: ['day', 'attempts', 'code', 'last error'],
      rows: s.failedDays.map((f) => [
        f.day,
        f.attempts,
        f.errorCode ?? '',
        (f.lastError ?? '').slice(0, 100),
      ]),
    },
    {
      title: 'Retrying days (an attempt of their load failed; Temporal retries it, the day is not failed):',
      head: ['day', 'attempt', 'next attempt (UTC)', 'code', 'last error'],
      rows: s.retryingDays.map((d) => [
        d.day,
        d.maxAttempts ? `${d.attempt} of ${d.maxAttempts}` : d.attempt,
        d.nextAttemptAt ? utc(d.nextAttemptAt) : 'running now',
        d.errorCode ?? '',
        (d.lastError ?? '').slice(0, 100),
      ]),
    },
    {
      title: `Abandoned days (marked running, no sign of life for ${s.staleAfterMinutes} min; the next load of each takes it over):`,
      head: ['day', 'load id', 'attempts', 'last sign of life (UTC)'],
      rows: s.abandonedDays.map((d) => [d.day, d.loadId ?? '', d.attempts, utc(d.lastSignOfLife ?? '')]),
    },
    {
      title:
        'Held deletes (past CRS_DELETE_GUARD; review: crs-sync deletes list, apply: crs-sync deletes apply):',
      head: ['day', 'held', 'still live', 'live rows', 'reason'],
      rows: s.heldDeletes.map((h) => [h.day, h.held, h.applicable, h.live, h.reason ?? '']),
    },
    {
      title:
        'Schema drift (the service sends what the contract does not describe; details: crs-sync schema changes, widen: crs-sync schema accept SOURCE PATH):',
      head: ['source', 'field', 'kind', 'first day', 'count', 'example'],
      rows: s.schemaDrift.map((d) => [d.source, d.path, d.kind, d.firstDay ?? '', d.count, d.example ?? '']),
    },
    {
      title:
        'Partial days (the open UTC day, pulled intraday: rows so far, nothing deleted, not in the watermark until its closed-day pull):',
      head: ['day', 'status', 'last pull (UTC)', 'rows', 'last pull failed'],
      rows: s.partialDays.map((d) => [
        d.day,
        'partial',
        d.lastPullAt ? utc(d.lastPullAt) : '(none finished)',
        d.rows,
        d.lastError
          ? `${d.errorCode ? `${d.errorCode}: ` : ''}${d.lastError.slice(0, 80)}${d.nextAttemptAt ? ` (attempt ${d.attempt}; next ${utc(d.nextAttemptAt)})` : ''}`
          : '',
      ]),
    },
    {
      title: 'Exports not known complete (loaded, nothing of the day deleted):',
      head: ['day', 'load id', 'why'],
      rows: s.incompleteExports.map((d) => [d.day, d.loadId ?? '', (d.reason ?? '').slice(0, 100)]),
    },
    recentRunsSection(s.recentRuns),
    {
      title: 'Quarantine (rejected_records; closed: dismissed, or gone from a complete load of the day):',
      head: ['source', 'error code', 'open', 'replayed', 'closed'],
      rows: s.rejects.map((r) => [r.source, r.errorCode, r.open, r.replayed, r.closed]),
    },
  ];
}
