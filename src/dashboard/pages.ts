/**
 * The dashboard's five pages: which queries each runs (its sections) and how their results are
 * shown. A page is rendered from a `PageData` (what the JSON endpoint returns as well), in which
 * each section either holds its rows or the error its query met, so one broken query shows an
 * error panel and leaves the rest of the page standing.
 */

import * as Q from '../warehouse/read/index.ts';
import {
  type Column,
  chartBox,
  dec,
  errorPanel,
  esc,
  figure,
  int,
  notice,
  section,
  table,
  time,
} from './html.ts';
import { type DayRange, shiftDay } from './range.ts';

export type PageName = 'usage' | 'users' | 'threads' | 'citations' | 'health';

export type SectionResult = { ok: true; data: unknown } | { ok: false; error: string };

export interface PageData {
  page: PageName;
  range: DayRange;
  /**
   * The part of the range the ranged queries read: the range cut to the days that can hold data
   * (range.ts `clampToData`); the range itself on the health page.
   */
  dataRange: DayRange;
  /** Where the ranged figures were read: the rollups, or the raw tables while a refresh is due. */
  source: Q.Source;
  extent: Q.DataExtent | null;
  sections: Record<string, SectionResult>;
}

/** Drawn by static/dashboard.js with uPlot: one x value per day, one array per series. */
export interface ChartSpec {
  days: string[];
  series: { label: string; values: (number | null)[] }[];
  bars?: boolean;
  /** Days of the chart that are partial (the open day so far): drawn hatched and labelled. */
  partial?: string[];
}

type SectionQuery = (q: Q.Queryable, r: DayRange, source: Q.Source) => Promise<unknown>;

export interface PageDef {
  name: PageName;
  title: string;
  /** One sentence under the title: what the page answers. */
  about: string;
  /** Whether the date range filters the page (sync health shows the state now). */
  ranged: boolean;
  sections: Record<string, SectionQuery>;
  render(d: PageData): { html: string; charts: Record<string, ChartSpec> };
}

/**
 * The x values of a chart over the whole range: every day of the data's part of it, so that a day
 * without rows shows as 0, not as a gap closed up; and the empty stretches outside it as their two
 * ends only (the range's end and the day next to the data), which draw the same flat line. So a
 * chart of 0001-01-01 … 9999-12-31 holds as many points as the data has days, plus four.
 */
function daysOf(d: PageData): string[] {
  const { range, dataRange: inner } = d;
  const out: string[] = [];
  if (range.from < inner.from) {
    out.push(range.from);
    const before = shiftDay(inner.from, -1);
    if (before > range.from) out.push(before);
  }
  for (let day = inner.from; day <= inner.to; day = shiftDay(day, 1)) out.push(day);
  if (inner.to < range.to) {
    const after = shiftDay(inner.to, 1);
    if (after < range.to) out.push(after);
    out.push(range.to);
  }
  return out;
}

function byDay<T extends { day: string }>(
  d: PageData,
  rows: T[],
  pick: (row: T) => number | null,
  gap: number | null,
) {
  const m = new Map(rows.map((x) => [x.day, pick(x)]));
  return daysOf(d).map((day) => (m.has(day) ? (m.get(day) ?? null) : gap));
}

/**
 * The range's partial days (the open UTC day, pulled intraday: its figures grow until it closes),
 * from the page's `partial` section: the charts hatch them and a note under them says so, so that
 * today's point is not read as a day that fell.
 */
function partialDays(d: PageData): string[] {
  const s = d.sections.partial;
  return s?.ok ? (s.data as string[]) : [];
}

function partialNote(days: string[]): string {
  if (days.length === 0) return '';
  return `<p class="help partial-note" data-partial-days="${esc(days.join(' '))}">${days.map(esc).join(', ')}: today so far (partial). The open UTC day is pulled during the day; its figures grow until it closes.</p>`;
}

/** The section's rows, or an error panel in the HTML (and undefined). */
function get<T>(d: PageData, key: string, out: string[]): T | undefined {
  const s = d.sections[key];
  if (!s) return undefined;
  if (!s.ok) {
    out.push(errorPanel(key, s.error));
    return undefined;
  }
  return s.data as T;
}

function emptyRange(d: PageData, totals: Q.UsageTotals | undefined): string {
  if (!totals || totals.messages > 0) return '';
  const e = d.extent;
  const span =
    e?.firstDay && e.lastDay
      ? ` Its live rows span ${esc(e.firstDay)} to ${esc(e.lastDay)}: <a href="?from=${esc(e.firstDay)}&amp;to=${esc(e.lastDay)}">show all of them</a>.`
      : ' It has no live export rows at all yet: run a sync (crs-sync sync, or crs-sync demo) first.';
  return notice(
    'empty',
    'no-rows',
    `The warehouse has no rows between ${esc(d.range.from)} and ${esc(d.range.to)}.${span}`,
  );
}

const usage: PageDef = {
  name: 'usage',
  title: 'Usage over time',
  about:
    'Messages, active users and threads, cancelled tasks and response length per UTC day (live export rows).',
  ranged: true,
  sections: { totals: Q.usageTotals, daily: Q.usageDaily, partial: Q.partialDaysIn },
  render(d) {
    const out: string[] = [];
    const charts: Record<string, ChartSpec> = {};
    const totals = get<Q.UsageTotals>(d, 'totals', out);
    const daily = get<Q.UsageDay[]>(d, 'daily', out);
    out.push(emptyRange(d, totals));
    if (totals) {
      // The days' cancelled tasks add up (a message is on one day); unknown when the days failed.
      const cancelled = daily ? daily.reduce((s, x) => s + x.cancelled, 0) : null;
      out.push(
        `<div class="figures">${[
          figure('messages', 'Messages', int(totals.messages)),
          figure('users', 'Users', int(totals.users), 'distinct over the range'),
          figure('threads', 'Threads', int(totals.threads), 'distinct over the range'),
          figure('cancelled', 'Cancelled', int(cancelled)),
          figure('days', 'Days with messages', int(totals.days)),
        ].join('')}</div>`,
      );
    }
    if (daily && totals?.messages) {
      const days = daysOf(d);
      const partial = partialDays(d);
      charts.messages = {
        days,
        partial,
        series: [
          { label: 'messages', values: byDay(d, daily, (x) => x.messages, 0) },
          { label: 'cancelled', values: byDay(d, daily, (x) => x.cancelled, 0) },
        ],
      };
      charts.active = {
        days,
        partial,
        series: [
          { label: 'active users', values: byDay(d, daily, (x) => x.activeUsers, 0) },
          { label: 'active threads', values: byDay(d, daily, (x) => x.activeThreads, 0) },
        ],
      };
      charts.length = {
        days,
        partial,
        series: [
          { label: 'mean response chars', values: byDay(d, daily, (x) => x.avgResponseChars, null) },
          {
            label: 'median response chars',
            values: byDay(d, daily, (x) => x.medianResponseChars, null),
          },
        ],
      };
      out.push(
        `<div class="charts">${chartBox('messages', 'Messages and cancelled per day')}${chartBox('active', 'Active users and threads per day')}${chartBox('length', 'Response length (characters, answered messages)')}</div>${partialNote(partial)}`,
      );
    }
    if (daily) {
      const cols: Column<Q.UsageDay>[] = [
        { title: 'Day', key: 'day', cell: (x) => esc(x.day) },
        { title: 'Messages', key: 'messages', cell: (x) => int(x.messages), numeric: true },
        { title: 'Active users', key: 'activeUsers', cell: (x) => int(x.activeUsers), numeric: true },
        { title: 'Active threads', key: 'activeThreads', cell: (x) => int(x.activeThreads), numeric: true },
        { title: 'Cancelled', key: 'cancelled', cell: (x) => int(x.cancelled), numeric: true },
        {
          title: 'Mean response chars',
          key: 'avgResponseChars',
          cell: (x) => dec(x.avgResponseChars),
          numeric: true,
        },
        {
          title: 'Median',
          key: 'medianResponseChars',
          cell: (x) => dec(x.medianResponseChars),
          numeric: true,
        },
      ];
      out.push(
        section('Per day', table('daily', cols, [...daily].reverse(), 'No day of the range has messages.')),
      );
    }
    return { html: out.join('\n'), charts };
  },
};

const users: PageDef = {
  name: 'users',
  title: 'Users',
  about: 'Who uses the service in the range: active and new users per day, and the most active users.',
  ranged: true,
  sections: {
    totals: Q.usageTotals,
    daily: Q.usageDaily,
    newUsers: Q.newUsersDaily,
    top: Q.topUsers,
    partial: Q.partialDaysIn,
  },
  render(d) {
    const out: string[] = [];
    const charts: Record<string, ChartSpec> = {};
    const totals = get<Q.UsageTotals>(d, 'totals', out);
    const daily = get<Q.UsageDay[]>(d, 'daily', out);
    const fresh = get<Q.NewUsersDay[]>(d, 'newUsers', out);
    const top = get<Q.TopUser[]>(d, 'top', out);
    out.push(emptyRange(d, totals));
    if (totals) {
      const newUsers = fresh ? fresh.reduce((s, x) => s + x.newUsers, 0) : null;
      out.push(
        `<div class="figures">${figure('users', 'Users', int(totals.users), 'with a message in the range')}${figure(
          'newUsers',
          'New users',
          int(newUsers),
          'first message ever in the range',
        )}${figure('messagesPerUser', 'Messages per user', dec(totals.users ? totals.messages / totals.users : null))}</div>`,
      );
    }
    if (daily && fresh && totals?.messages) {
      charts.users = {
        days: daysOf(d),
        partial: partialDays(d),
        series: [
          { label: 'active users', values: byDay(d, daily, (x) => x.activeUsers, 0) },
          { label: 'new users', values: byDay(d, fresh, (x) => x.newUsers, 0) },
        ],
      };
      out.push(
        `<div class="charts">${chartBox('users', 'Active and new users per day')}</div>${partialNote(partialDays(d))}`,
      );
    }
    if (top) {
      const cols: Column<Q.TopUser>[] = [
        { title: 'User', key: 'userId', cell: (x) => `<code>${esc(x.userId)}</code>` },
        { title: 'Messages', key: 'messages', cell: (x) => int(x.messages), numeric: true },
        { title: 'Threads', key: 'threads', cell: (x) => int(x.threads), numeric: true },
        { title: 'Days active', key: 'daysActive', cell: (x) => int(x.daysActive), numeric: true },
        { title: 'First message (UTC)', key: 'firstSeenAt', cell: (x) => time(x.firstSeenAt) },
        { title: 'Last message (UTC)', key: 'lastSeenAt', cell: (x) => time(x.lastSeenAt) },
      ];
      out.push(
        section(
          `Most active users (top ${Q.TOP_N})`,
          table('topUsers', cols, top, 'No user wrote in the range.'),
        ),
      );
    }
    return { html: out.join('\n'), charts };
  },
};

const threads: PageDef = {
  name: 'threads',
  title: 'Threads',
  about:
    'Threads with a message in the range: their enrichment status, their depth (history entries stored) and the busiest.',
  ranged: true,
  // No usageTotals here: the breakdown's sum is the threads' count and the days' sum the
  // messages', which spares the page a second pass over the range's threads.
  sections: {
    daily: Q.usageDaily,
    breakdown: Q.threadBreakdown,
    top: Q.topThreads,
  },
  // Long: the page's HTML top to bottom, one block per section, each a few lines of markup.
  render(d) {
    const out: string[] = [];
    const daily = get<Q.UsageDay[]>(d, 'daily', out);
    const breakdown = get<Q.ThreadBreakdown>(d, 'breakdown', out);
    const top = get<Q.TopThread[]>(d, 'top', out);
    const statuses = breakdown?.statuses;
    const depth = breakdown?.depth;
    const totals =
      daily && breakdown
        ? {
            messages: daily.reduce((n, x) => n + x.messages, 0),
            threads: breakdown.statuses.reduce((n, x) => n + x.threads, 0),
            users: 0,
            days: daily.length,
          }
        : undefined;
    out.push(emptyRange(d, totals));
    if (totals) {
      out.push(
        `<div class="figures">${figure('threads', 'Threads', int(totals.threads), 'with a message in the range')}${figure(
          'messagesPerThread',
          'Messages per thread',
          dec(totals.threads ? totals.messages / totals.threads : null),
        )}</div>`,
      );
    }
    const parts: string[] = [];
    if (statuses) {
      parts.push(
        section(
          'By enrichment status',
          table(
            'statuses',
            [
              {
                title: 'Status',
                key: 'status',
                cell: (x) => `<span class="status s-${esc(x.status)}">${esc(x.status)}</span>`,
              },
              { title: 'Threads', key: 'threads', cell: (x) => int(x.threads), numeric: true },
            ],
            statuses,
            'No thread in the range.',
          ),
        ),
      );
    }
    if (depth) {
      parts.push(
        section(
          'By depth',
          table(
            'depth',
            [
              { title: 'History entries', key: 'bucket', cell: (x) => esc(x.bucket) },
              { title: 'Threads', key: 'threads', cell: (x) => int(x.threads), numeric: true },
            ],
            depth,
            'No thread in the range.',
          ),
          'History entries enrichment has stored per thread (0: not enriched yet, or gone).',
        ),
      );
    }
    if (parts.length) out.push(`<div class="columns">${parts.join('')}</div>`);
    if (top) {
      const cols: Column<Q.TopThread>[] = [
        { title: 'Thread', key: 'threadId', cell: (x) => `<code>${esc(x.threadId)}</code>` },
        { title: 'Name', key: 'threadName', cell: (x) => esc(x.threadName ?? '') },
        { title: 'Status', key: 'status', cell: (x) => esc(x.status ?? '(not queued)') },
        { title: 'Messages', key: 'messages', cell: (x) => int(x.messages), numeric: true },
        {
          title: 'History entries',
          key: 'historyEntries',
          cell: (x) => int(x.historyEntries),
          numeric: true,
        },
        { title: 'Citations', key: 'citations', cell: (x) => int(x.citations), numeric: true },
        { title: 'Last message (UTC)', key: 'lastMessageAt', cell: (x) => time(x.lastMessageAt) },
      ];
      out.push(
        section(
          `Busiest threads (top ${Q.TOP_N})`,
          table('topThreads', cols, top, 'No thread in the range.'),
          'Messages: live export rows of the thread in the range; history entries and citations: all stored.',
        ),
      );
    }
    return { html: out.join('\n'), charts: {} };
  },
};

const citations: PageDef = {
  name: 'citations',
  title: 'Citation sources',
  about:
    'Citations by type over time and by source. A citation counts on the UTC day of the history entry that cites it (or that named the cited artifact).',
  ranged: true,
  sections: {
    totals: Q.usageTotals,
    types: Q.citationTypeTotals,
    daily: Q.citationTypesDaily,
    top: Q.topCitationSources,
    partial: Q.partialDaysIn,
  },
  render(d) {
    const out: string[] = [];
    const charts: Record<string, ChartSpec> = {};
    const totals = get<Q.UsageTotals>(d, 'totals', out);
    const types = get<Q.CitationTypeTotal[]>(d, 'types', out);
    const daily = get<Q.CitationTypeDay[]>(d, 'daily', out);
    const top = get<Q.CitationSource[]>(d, 'top', out);
    out.push(emptyRange(d, totals));
    if (types) {
      out.push(
        `<div class="figures">${figure('citations', 'Citations', int(types.reduce((s, x) => s + x.citations, 0)))}${figure(
          'types',
          'Citation types',
          int(types.length),
        )}</div>`,
      );
      out.push(
        section(
          'By type',
          table(
            'types',
            [
              { title: 'Type', key: 'citationType', cell: (x) => esc(x.citationType) },
              { title: 'Citations', key: 'citations', cell: (x) => int(x.citations), numeric: true },
              { title: 'Sources', key: 'sources', cell: (x) => int(x.sources), numeric: true },
            ],
            types,
            'No citation in the range (threads not enriched yet, or none cited a source).',
          ),
        ),
      );
    }
    if (daily && daily.length > 0) {
      const names = [...new Set(daily.map((x) => x.citationType))].sort();
      charts.types = {
        days: daysOf(d),
        partial: partialDays(d),
        series: names.map((n) => ({
          label: n,
          values: byDay(
            d,
            daily.filter((x) => x.citationType === n),
            (x) => x.citations,
            0,
          ),
        })),
      };
      out.push(
        `<div class="charts">${chartBox('types', 'Citations per day by type')}</div>${partialNote(partialDays(d))}`,
      );
    }
    if (top) {
      out.push(
        section(
          `Most cited sources (top ${Q.TOP_N})`,
          table(
            'topSources',
            [
              { title: 'Type', key: 'citationType', cell: (x) => esc(x.citationType) },
              { title: 'Source', key: 'name', cell: (x) => esc(x.name) },
              { title: 'Citations', key: 'citations', cell: (x) => int(x.citations), numeric: true },
              {
                title: 'Threads (all time)',
                key: 'threadsAllTime',
                cell: (x) => int(x.threadsAllTime),
                numeric: true,
              },
            ],
            top,
            'No citation in the range.',
          ),
        ),
      );
    }
    return { html: out.join('\n'), charts };
  },
};

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
      figure('completeDays', 'Complete days', int(h.completeDays)),
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

const health: PageDef = {
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

export const PAGES: Readonly<Record<PageName, PageDef>> = { usage, users, threads, citations, health };
export const PAGE_ORDER: PageName[] = ['usage', 'users', 'threads', 'citations', 'health'];
