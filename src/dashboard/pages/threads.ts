/** The threads page: enrichment status, depth and the busiest threads of the range. */

import * as Q from '../../warehouse/read/index.ts';
import { type Column, dec, esc, figure, int, section, table, time } from '../html.ts';
import { emptyRange, get, type PageDef } from './shared.ts';

/** The range's threads by enrichment status and by depth, side by side. */
function breakdownPart(b: Q.ThreadBreakdown): string {
  const statuses = section(
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
      b.statuses,
      'No thread in the range.',
    ),
  );
  const depth = section(
    'By depth',
    table(
      'depth',
      [
        { title: 'History entries', key: 'bucket', cell: (x) => esc(x.bucket) },
        { title: 'Threads', key: 'threads', cell: (x) => int(x.threads), numeric: true },
      ],
      b.depth,
      'No thread in the range.',
    ),
    'History entries enrichment has stored per thread (0: not enriched yet, or gone).',
  );
  return `<div class="columns">${statuses}${depth}</div>`;
}

function topThreadsPart(top: Q.TopThread[]): string {
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
  return section(
    `Busiest threads (top ${Q.TOP_N})`,
    table('topThreads', cols, top, 'No thread in the range.'),
    'Messages: live export rows of the thread in the range; history entries and citations: all stored.',
  );
}

export const threads: PageDef = {
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
  render(d) {
    const out: string[] = [];
    const daily = get<Q.UsageDay[]>(d, 'daily', out);
    const breakdown = get<Q.ThreadBreakdown>(d, 'breakdown', out);
    const top = get<Q.TopThread[]>(d, 'top', out);
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
    if (breakdown) out.push(breakdownPart(breakdown));
    if (top) out.push(topThreadsPart(top));
    return { html: out.join('\n'), charts: {} };
  },
};
