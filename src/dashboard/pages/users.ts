/** The users page: active and new users per day, and the most active users. */

import * as Q from '../../warehouse/read/index.ts';
import { type Column, chartBox, dec, esc, figure, int, section, table, time } from '../html.ts';
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

export const users: PageDef = {
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
