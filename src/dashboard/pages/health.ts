/** The sync health page: is the warehouse current, and what needs attention. */

import * as Q from '../../warehouse/read/index.ts';
import { type Column, esc, figure, int, section, table, time } from '../html.ts';
import type { DayRange } from '../range.ts';
import { get, type PageDef } from './shared.ts';

// The health page's parts, top to bottom as an operator checks: current? failed? held?
// quarantined? backlog? runs? days?
function healthFigures(h: Q.SyncHealth): string {
  const out: string[] = [];
  const lag = h.lagDays === null ? '–' : `${int(h.lagDays)} day${h.lagDays === 1 ? '' : 's'}`;
  out.push(
    `<div class="figures">${[
      figure(
        'watermark',
        'Watermark',
        esc(h.watermark ?? 'none yet'),
        'last day of the unbroken run of complete days',
      ),
      figure('lag', 'Lag', lag, '0: current (watermark is yesterday, UTC)'),
      figure('daysComplete', 'Complete days', int(h.daysComplete)),
      figure('failedDays', 'Failed days', int(h.failedDays)),
      figure('runningDays', 'Running days', int(h.runningDays), `${int(h.retryingDays)} retrying`),
      figure('pendingDays', 'Pending days', int(h.pendingDays)),
      figure('openRejects', 'Open rejects', int(h.openRejects)),
      figure('heldDeletes', 'Held deletes', int(h.heldDeletes), `${int(h.heldDeleteDays)} day(s)`),
      figure('threadsPending', 'Threads pending', int(h.threadsPending)),
      figure('threadsFailed', 'Threads failed', int(h.threadsFailed)),
    ].join('')}</div>`,
  );
  out.push(
    `<p class="help" data-figure="lastRun">Last run: ${esc(h.lastRunKind ?? 'none')} ${esc(h.lastRunLoadId ?? '')} ${esc(
      h.lastRunStatus ?? '',
    )}, started ${time(h.lastRunStartedAt)}; last success ${time(h.lastSuccessAt)}.</p>`,
  );
  return out.join('\n');
}

function failedDaysPart(failed: Q.FailedDay[]): string {
  const out: string[] = [];
  out.push(
    section(
      'Failed days',
      table(
        'failedDays',
        [
          { title: 'Day', key: 'day', cell: (x) => esc(x.day) },
          { title: 'Attempts', key: 'attempts', cell: (x) => int(x.attempts), numeric: true },
          {
            title: 'Error',
            key: 'lastError',
            cell: (x) => `<span class="err">${esc(x.lastError ?? '')}</span>`,
          },
          { title: 'Ended (UTC)', key: 'finishedAt', cell: (x) => time(x.finishedAt) },
        ],
        failed,
        'No failed day.',
      ),
      'Their load stopped retrying (attempts: its attempts). The next sync loads them again; the watermark stops at the first.',
    ),
  );
  return out.join('\n');
}

function retryingDaysPart(days: Q.RetryingLedgerDay[]): string {
  return section(
    'Retrying days',
    table(
      'retryingDays',
      [
        { title: 'Day', key: 'day', cell: (x) => esc(x.day) },
        {
          title: 'Attempt',
          key: 'attempt',
          cell: (x) => `${int(x.attempt)}${x.maxAttempts ? ` of ${int(x.maxAttempts)}` : ''}`,
          numeric: true,
        },
        {
          title: 'Next attempt (UTC)',
          key: 'nextAttemptAt',
          cell: (x) => (x.nextAttemptAt ? time(x.nextAttemptAt) : 'running now'),
        },
        { title: 'Code', key: 'errorCode', cell: (x) => `<code>${esc(x.errorCode ?? '')}</code>` },
        {
          title: 'Last error',
          key: 'lastError',
          cell: (x) => `<span class="err">${esc(x.lastError ?? '')}</span>`,
        },
      ],
      days,
      'No day is retrying.',
    ),
    'An attempt of their load failed and Temporal retries it: running, not failed. They fail only when the attempts run out.',
  );
}

function heldDeletesPart(held: Q.HeldDeleteDay[]): string {
  const out: string[] = [];
  out.push(
    section(
      'Held deletes',
      table(
        'heldDeletes',
        [
          { title: 'Day', key: 'day', cell: (x) => esc(x.day) },
          { title: 'Rows', key: 'rows', cell: (x) => int(x.rows), numeric: true },
          { title: 'Why', key: 'reason', cell: (x) => esc(x.reason ?? '') },
          { title: 'Held at (UTC)', key: 'heldAt', cell: (x) => time(x.heldAt) },
        ],
        held,
        'No delete is held.',
      ),
      'Soft-deletes past CRS_DELETE_GUARD, waiting for review: crs-sync deletes list, then crs-sync deletes apply.',
    ),
  );
  return out.join('\n');
}

function schemaDriftPart(drift: Q.SchemaDrift[]): string {
  return section(
    'Schema drift',
    table(
      'schemaDrift',
      [
        { title: 'Source', key: 'source', cell: (x) => esc(x.source) },
        { title: 'Field', key: 'path', cell: (x) => esc(x.path) },
        { title: 'Kind', key: 'kind', cell: (x) => esc(x.kind) },
        { title: 'First day', key: 'firstDay', cell: (x) => esc(x.firstDay ?? '') },
        { title: 'Count', key: 'count', cell: (x) => int(x.count), numeric: true },
        { title: 'Example', key: 'example', cell: (x) => esc(x.example ?? '') },
      ],
      drift,
      'The service sends nothing the contract does not describe.',
    ),
    'Fields the service sent that the contract does not describe, not accepted yet: crs-sync schema changes, then crs-sync schema accept SOURCE PATH.',
  );
}

function quarantinePart(rej: Q.QuarantineCode[]): string {
  const out: string[] = [];
  out.push(
    section(
      'Quarantine by error code',
      table(
        'quarantine',
        [
          { title: 'Source', key: 'source', cell: (x) => esc(x.source) },
          { title: 'Error code', key: 'errorCode', cell: (x) => `<code>${esc(x.errorCode)}</code>` },
          { title: 'Open', key: 'open', cell: (x) => int(x.open), numeric: true },
          { title: 'Replayed', key: 'replayed', cell: (x) => int(x.replayed), numeric: true },
          {
            title: 'Examples (latest)',
            key: 'examples',
            cell: (x) =>
              x.examples
                .map(
                  (e) =>
                    `<div class="example">#${esc(e.id)}${e.day ? ` ${esc(e.day)}` : ''}${
                      e.lineNo ? ` line ${esc(e.lineNo)}` : ''
                    }: ${esc(e.detail)}<pre>${esc(e.raw)}</pre></div>`,
                )
                .join(''),
          },
        ],
        rej,
        'Nothing is quarantined.',
      ),
      'Lines and entries that could not be loaded; replay them with crs-sync rejects replay once fixed.',
    ),
  );
  return out.join('\n');
}

function backlogPart(backlog: Q.EnrichmentBacklog): string {
  const out: string[] = [];
  const pending = backlog.byStatus.find((x) => x.status === 'pending')?.threads ?? 0;
  out.push(
    section(
      'Enrichment backlog',
      `<div class="figures">${figure('backlog', 'Threads waiting', int(pending))}${figure(
        'oldestPending',
        'Waiting since (UTC)',
        time(backlog.oldestPendingSince),
      )}</div>${table(
        'threadStatuses',
        [
          { title: 'Status', key: 'status', cell: (x) => esc(x.status) },
          { title: 'Threads', key: 'threads', cell: (x) => int(x.threads), numeric: true },
        ],
        backlog.byStatus,
        'No thread yet.',
      )}${
        backlog.failed.length
          ? table(
              'failedThreads',
              [
                {
                  title: 'Failed thread',
                  key: 'threadId',
                  cell: (x) => `<code>${esc(x.threadId)}</code>`,
                },
                { title: 'Attempts', key: 'attempts', cell: (x) => int(x.attempts), numeric: true },
                { title: 'Error', key: 'lastError', cell: (x) => esc(x.lastError ?? '') },
              ],
              backlog.failed,
              '',
            )
          : ''
      }`,
    ),
  );
  return out.join('\n');
}

/**
 * Lines dropped because `crs-sync forget` erased their user or thread: a column only when a row
 * has some (most deployments never erase anyone); the section's JSON always has the figure.
 */
function suppressedColumn<T extends { suppressed: number }>(rows: T[]): Column<T>[] {
  if (!rows.some((x) => x.suppressed > 0)) return [];
  return [{ title: 'Suppressed', key: 'suppressed', cell: (x) => int(x.suppressed), numeric: true }];
}

function recentRunsPart(runs: Q.RecentRun[]): string {
  const out: string[] = [];
  out.push(
    section(
      'Recent runs',
      table(
        'runs',
        [
          { title: 'Run', key: 'loadId', cell: (x) => `<code>${esc(x.loadId)}</code>` },
          { title: 'Kind', key: 'kind', cell: (x) => esc(x.kind) },
          {
            title: 'Status',
            key: 'status',
            cell: (x) => `<span class="status s-${esc(x.status)}">${esc(x.status)}</span>`,
          },
          {
            title: 'Window',
            key: 'window',
            cell: (x) => (x.windowStart ? `${esc(x.windowStart)} … ${esc(x.windowEnd)}` : ''),
          },
          { title: 'Read', key: 'rowsRead', cell: (x) => int(x.rowsRead), numeric: true },
          { title: 'Inserted', key: 'inserted', cell: (x) => int(x.inserted), numeric: true },
          { title: 'Updated', key: 'updated', cell: (x) => int(x.updated), numeric: true },
          { title: 'Rejected', key: 'rejected', cell: (x) => int(x.rejected), numeric: true },
          ...suppressedColumn(runs),
          { title: 'Deleted', key: 'deleted', cell: (x) => int(x.deleted), numeric: true },
          { title: 'Started (UTC)', key: 'startedAt', cell: (x) => time(x.startedAt) },
          { title: 'Error', key: 'error', cell: (x) => `<span class="err">${esc(x.error ?? '')}</span>` },
        ],
        runs,
        'No run yet.',
      ),
    ),
  );
  return out.join('\n');
}

/**
 * A day's status; a partial day (the open UTC day, pulled intraday) says so and when it was last
 * pulled, since its figures are the export so far, not the day.
 */
function dayStatusCell(x: Q.LedgerDay): string {
  const pill = `<span class="status s-${esc(x.status)}">${esc(x.status)}</span>`;
  if (x.status !== 'partial') return pill;
  const at = x.pulledAt ? `, last pull ${esc(x.pulledAt.slice(11, 16))} UTC` : ', no pull finished yet';
  return `${pill} <span class="help" data-figure="partialDay">open day, so far${at}: nothing deleted until it closes</span>`;
}

function ledgerDaysPart(days: Q.LedgerDay[], range: DayRange): string {
  const out: string[] = [];
  const counts = new Map<string, number>();
  for (const x of days) counts.set(x.status, (counts.get(x.status) ?? 0) + 1);
  out.push(
    section(
      `Days ${range.from} … ${range.to}`,
      `<p class="help" data-figure="daysByStatus">${
        [...counts].map(([k, v]) => `${esc(k)} ${int(v)}`).join(', ') ||
        'no day of the range is in the ledger'
      }</p>${table(
        'days',
        [
          { title: 'Day', key: 'day', cell: (x) => esc(x.day) },
          { title: 'Status', key: 'status', cell: dayStatusCell },
          { title: 'Read', key: 'rowsRead', cell: (x) => int(x.rowsRead), numeric: true },
          { title: 'Inserted', key: 'inserted', cell: (x) => int(x.inserted), numeric: true },
          { title: 'Updated', key: 'updated', cell: (x) => int(x.updated), numeric: true },
          { title: 'Rejected', key: 'rejected', cell: (x) => int(x.rejected), numeric: true },
          ...suppressedColumn(days),
          { title: 'Deleted', key: 'deleted', cell: (x) => int(x.deleted), numeric: true },
          { title: 'Attempts', key: 'attempts', cell: (x) => int(x.attempts), numeric: true },
        ],
        days,
        'No day of the range is in the ledger.',
      )}`,
    ),
  );
  return out.join('\n');
}

export const health: PageDef = {
  name: 'health',
  title: 'Sync health',
  about:
    'Is the warehouse current, and what needs attention. The state now; only the list of days follows the date range.',
  ranged: false,
  sections: {
    health: (q) => Q.syncHealth(q),
    freshness: (q) => Q.healthViewFreshness(q),
    days: Q.ledgerDays,
    failed: (q) => Q.failedDays(q),
    retrying: (q) => Q.retryingDays(q),
    held: (q) => Q.heldDeletes(q),
    quarantine: (q) => Q.quarantine(q),
    backlog: (q) => Q.enrichmentBacklog(q),
    runs: (q) => Q.recentRuns(q),
    drift: (q) => Q.openSchemaDrift(q),
  },
  render(d) {
    const out: string[] = [];
    // Each part shows its rows, or its error panel where it would have been.
    const part = <T>(key: string, show: (rows: T) => string) => {
      const rows = get<T>(d, key, out);
      if (rows) out.push(show(rows));
    };
    part<Q.SyncHealth>('health', healthFigures);
    part<Q.Freshness>(
      'freshness',
      (f) => `<p class="help" data-figure="freshness">Freshness: ${esc(Q.describeFreshness(f))}.</p>`,
    );
    part<Q.FailedDay[]>('failed', failedDaysPart);
    part<Q.RetryingLedgerDay[]>('retrying', retryingDaysPart);
    part<Q.HeldDeleteDay[]>('held', heldDeletesPart);
    part<Q.SchemaDrift[]>('drift', schemaDriftPart);
    part<Q.QuarantineCode[]>('quarantine', quarantinePart);
    part<Q.EnrichmentBacklog>('backlog', backlogPart);
    part<Q.RecentRun[]>('runs', recentRunsPart);
    part<Q.LedgerDay[]>('days', (days) => ledgerDaysPart(days, d.range));
    return { html: out.join('\n'), charts: {} };
  },
};
