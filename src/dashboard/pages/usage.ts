/** The usage page: messages, users, threads, cancelled tasks and response length per day. */

import * as Q from '../../warehouse/read/index.ts';
import { type Column, chartBox, dec, esc, figure, int, section, table } from '../html.ts';
import {
  byDay,
  type ChartSpec,
  daysOf,
  emptyRange,
  get,
  type PageDef,
  partialDays,
  partialNote,
} from './shared.ts';

export const usage: PageDef = {
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
