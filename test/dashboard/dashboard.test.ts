import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import type { Browser, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findChromium, launchChromium } from '../../src/dashboard/page-load.ts';
import { type Dashboard, startDashboard } from '../../src/dashboard/server.ts';
import { openWarehouse } from '../../src/warehouse/db.ts';
import { DASHBOARD_QUERIES, RAW_DASHBOARD_QUERIES } from '../../src/warehouse/read/index.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { type LoadedWarehouse, loadWarehouse } from './fixture.ts';

/**
 * `crs-sync dashboard` in a real browser (Debian's chromium, headless, driven by puppeteer-core)
 * against a warehouse loaded from the simulator over HTTP (fixture.ts). Every figure checked here
 * is compared with SQL written in this file over the raw tables, not with the dashboard's own
 * queries. Each page is saved as a PNG in test/dashboard/screenshots/ (git-ignored) to look at.
 */

const SEED = 1207;
const SHOTS = path.join(import.meta.dirname, 'screenshots');

let lw: LoadedWarehouse;
let dash: Dashboard;
let browser: Browser;
let page: Page;
let all: { from: string; to: string };

beforeAll(async () => {
  // No Chromium is a failure that says what to install, never a skipped test: CI installs it.
  const chromium = findChromium();
  console.info(`dashboard browser tests: seed ${SEED}, chromium ${chromium}`);
  mkdirSync(SHOTS, { recursive: true });
  lw = await loadWarehouse(SEED);
  dash = await startDashboard({ pool: lw.tw.w.pool, port: 0, warehouse: `test schema ${lw.tw.schema}` });
  browser = await launchChromium(chromium);
  page = await browser.newPage();
  all = { from: lw.days[0] as string, to: lw.days[lw.days.length - 1] as string };
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await dash?.close();
  await lw?.dispose();
});

async function q<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  return (await lw.tw.w.pool.query(text, params)).rows as T[];
}

const num = (s: string | null | undefined) => Number(String(s ?? '').replace(/,/g, ''));
const dec = (n: number | null) =>
  n === null ? '–' : n.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });

async function open(p: Page, pathAndQuery: string): Promise<number> {
  const res = await p.goto(`${dash.url}${pathAndQuery}`, { waitUntil: 'load' });
  await p.waitForSelector('body[data-charts-drawn]');
  return res?.status() ?? 0;
}

async function figure(p: Page, name: string): Promise<string> {
  return p.$eval(`[data-figure="${name}"] .value`, (el) => el.textContent ?? '');
}

async function rowsOf(p: Page, table: string): Promise<Record<string, string>[]> {
  return p.$$eval(`table[data-table="${table}"] tbody tr`, (trs) =>
    trs.map((tr) =>
      Object.fromEntries(
        [...tr.querySelectorAll('td')].map((td) => [td.dataset.col ?? '', (td.textContent ?? '').trim()]),
      ),
    ),
  );
}

async function errorPanels(p: Page): Promise<string[]> {
  return p.$$eval('[data-error]', (els) => els.map((e) => e.textContent ?? ''));
}

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

const qs = (r: { from: string; to: string }) => `from=${r.from}&to=${r.to}`;

/** Usage per day over the raw tables: cancelled = blank response or a "User cancelled" entry. */
async function usageBySql(r: { from: string; to: string }) {
  return q<{
    day: string;
    messages: number;
    users: number;
    threads: number;
    cancelled: number;
    avg: number | null;
  }>(
    `select a.message_date::text as day, count(*) as messages, count(distinct a.user_id) as users,
            count(distinct a.thread_id) as threads,
            count(*) filter (where a.response_chars = 0 or coalesce(h.is_cancelled, false)) as cancelled,
            round(avg(a.response_chars) filter (where a.response_chars > 0 and not coalesce(h.is_cancelled, false)), 1)::float8 as avg
       from analytics_messages a left join thread_messages h on h.message_id = a.message_id
      where a._deleted_at is null and a.message_date between $1 and $2
      group by 1 order by 1 desc`,
    [r.from, r.to],
  );
}

async function totalsBySql(r: { from: string; to: string }) {
  const [t] = await q<{ messages: number; users: number; threads: number }>(
    `select count(*) as messages, count(distinct user_id) as users, count(distinct thread_id) as threads
       from analytics_messages where _deleted_at is null and message_date between $1 and $2`,
    [r.from, r.to],
  );
  if (!t) throw new Error('no totals');
  return t;
}

describe('the dashboard over a warehouse loaded from the simulator', () => {
  it('when the loaded warehouse is looked at, then it holds what every page needs to show (guards the fixture)', async () => {
    const [c] = await q<Record<string, number>>(
      `select (select count(*) from analytics_messages where _deleted_at is not null) as deleted,
              (select count(*) from held_deletes) as held, (select count(*) from sync_days where status = 'failed') as failed,
              (select count(*) from rejected_records) as rejected, (select count(*) from citations) as citations,
              (select count(*) from threads where enrich_status = 'done') as enriched`,
    );
    expect(c).toMatchObject({ deleted: 0 });
    expect(c?.held).toBeGreaterThan(0);
    expect(c?.failed).toBe(1);
    expect(c?.rejected).toBeGreaterThan(0);
    expect(c?.citations).toBeGreaterThan(0);
    expect(c?.enriched).toBeGreaterThan(0);
  });

  it('when every dashboard query runs on the rollups and on the raw tables, then both give the same rows, for several ranges', async () => {
    const [cur] = await q<{ n: number }>(
      'select (select count(*) from rollup_dirty_days) + (select count(*) from rollup_dirty_threads) as n',
    );
    expect(cur?.n).toBe(0);
    const ranges = [
      all,
      { from: lw.days[2] as string, to: lw.days[4] as string },
      { from: '2020-01-01', to: '2020-01-31' },
    ];
    for (const r of ranges) {
      for (const [name, run] of Object.entries(DASHBOARD_QUERIES)) {
        const raw = RAW_DASHBOARD_QUERIES[name];
        expect(raw, name).toBeDefined();
        expect(await run(lw.tw.w.pool, r), `${name} ${r.from}..${r.to}`).toEqual(
          await raw?.(lw.tw.w.pool, r),
        );
      }
    }
    expect(Object.keys(RAW_DASHBOARD_QUERIES).sort()).toEqual(Object.keys(DASHBOARD_QUERIES).sort());
  });

  it('when the usage page is opened on the whole range, then its figures and its daily table equal the SQL and its charts are drawn', async () => {
    expect(await open(page, `/usage?${qs(all)}`)).toBe(200);
    await shot('usage');
    expect(await errorPanels(page)).toEqual([]);
    const t = await totalsBySql(all);
    expect(t.messages).toBeGreaterThan(100);
    expect(num(await figure(page, 'messages'))).toBe(t.messages);
    expect(num(await figure(page, 'users'))).toBe(t.users);
    expect(num(await figure(page, 'threads'))).toBe(t.threads);
    const daily = await usageBySql(all);
    expect(num(await figure(page, 'cancelled'))).toBe(daily.reduce((s, d) => s + d.cancelled, 0));
    expect(num(await figure(page, 'days'))).toBe(lw.days.length);
    const shown = await rowsOf(page, 'daily');
    expect(
      shown.map((r) => [
        r.day,
        num(r.messages),
        num(r.activeUsers),
        num(r.activeThreads),
        num(r.cancelled),
        r.avgResponseChars,
      ]),
    ).toEqual(daily.map((d) => [d.day, d.messages, d.users, d.threads, d.cancelled, dec(d.avg)]));
    expect(await page.$$eval('.chart[data-drawn] canvas', (c) => c.length)).toBe(3);
    // Loads and enrichment refresh the rollups: the page read them.
    expect(await page.$eval('[data-source]', (e) => e.getAttribute('data-source'))).toBe('rollup');
  });

  it('when the last day is the open day pulled intraday (partial), then the charts hatch it and a note under them says it is today so far', async () => {
    const last = all.to;
    const [before] = await q<{ status: string }>('select status from sync_days where day = $1', [last]);
    expect(before?.status).toBe('complete');
    expect(await open(page, `/usage?${qs(all)}`)).toBe(200);
    expect(await page.$$('.partial-note')).toHaveLength(0);
    expect(await page.$$eval('.chart[data-partial]', (c) => c.length)).toBe(0);
    await q(`update sync_days set status = 'partial' where day = $1`, [last]);
    try {
      for (const [name, charts] of [
        ['usage', 3],
        ['users', 1],
      ] as const) {
        expect(await open(page, `/${name}?${qs(all)}`)).toBe(200);
        expect(await errorPanels(page)).toEqual([]);
        expect(await page.$eval('.partial-note', (e) => e.getAttribute('data-partial-days'))).toBe(last);
        expect(await page.$eval('.partial-note', (e) => e.textContent)).toContain(
          `${last}: today so far (partial)`,
        );
        expect(
          await page.$$eval('.chart[data-drawn][data-partial]', (c) =>
            c.map((e) => e.getAttribute('data-partial')),
          ),
        ).toEqual(Array(charts).fill(last));
        if (name === 'usage') await shot('usage-partial');
      }
      // A range that ends before it: nothing partial in it, nothing marked.
      expect(
        await open(page, `/usage?${qs({ from: all.from, to: lw.days[lw.days.length - 2] as string })}`),
      ).toBe(200);
      expect(await page.$$('.partial-note')).toHaveLength(0);
    } finally {
      await q(`update sync_days set status = $2 where day = $1`, [last, before?.status]);
    }
  });

  it('when a narrower range is applied with the form, then the address carries it and every figure is that range’s SQL', async () => {
    await open(page, `/usage?${qs(all)}`);
    const narrow = { from: lw.days[2] as string, to: lw.days[4] as string };
    await page.$eval(
      'input[name="from"]',
      (el, v) => {
        (el as unknown as { value: string }).value = v;
      },
      narrow.from,
    );
    await page.$eval(
      'input[name="to"]',
      (el, v) => {
        (el as unknown as { value: string }).value = v;
      },
      narrow.to,
    );
    await Promise.all([
      page.waitForNavigation({ waitUntil: 'load' }),
      page.click('form.range button[type="submit"]'),
    ]);
    await page.waitForSelector('body[data-charts-drawn]');
    expect(new URL(page.url()).searchParams.get('from')).toBe(narrow.from);
    expect(new URL(page.url()).searchParams.get('to')).toBe(narrow.to);
    const t = await totalsBySql(narrow);
    const whole = await totalsBySql(all);
    expect(t.messages).toBeLessThan(whole.messages);
    expect(num(await figure(page, 'messages'))).toBe(t.messages);
    expect(num(await figure(page, 'users'))).toBe(t.users);
    expect(num(await figure(page, 'threads'))).toBe(t.threads);
    expect((await rowsOf(page, 'daily')).map((r) => r.day)).toEqual([lw.days[4], lw.days[3], lw.days[2]]);
    // The other pages keep the range in their links.
    const href = await page.$eval('nav a[href^="/threads"]', (a) => a.getAttribute('href'));
    expect(href).toBe(`/threads?${qs(narrow)}`);
  });

  it('when the users page is opened, then its figures and its top users equal the SQL', async () => {
    expect(await open(page, `/users?${qs(all)}`)).toBe(200);
    await shot('users');
    expect(await errorPanels(page)).toEqual([]);
    expect(num(await figure(page, 'users'))).toBe((await totalsBySql(all)).users);
    const [fresh] = await q<{ n: number }>(
      `select count(*) as n from (select user_id, min(message_date) as d from analytics_messages
        where _deleted_at is null group by user_id) u where d between $1 and $2`,
      [all.from, all.to],
    );
    expect(num(await figure(page, 'newUsers'))).toBe(fresh?.n);
    const top = await q<{ userId: string; messages: number; threads: number; days: number }>(
      `select user_id::text as "userId", count(*) as messages, count(distinct thread_id) as threads,
              count(distinct message_date) as days
         from analytics_messages where _deleted_at is null and message_date between $1 and $2
        group by user_id order by count(*) desc, user_id limit 25`,
      [all.from, all.to],
    );
    const shown = await rowsOf(page, 'topUsers');
    expect(shown.map((r) => [r.userId, num(r.messages), num(r.threads), num(r.daysActive)])).toEqual(
      top.map((u) => [u.userId, u.messages, u.threads, u.days]),
    );
  });

  it('when the threads page is opened, then threads by status and by depth, and the busiest, equal the SQL', async () => {
    expect(await open(page, `/threads?${qs(all)}`)).toBe(200);
    await shot('threads');
    expect(await errorPanels(page)).toEqual([]);
    const inRange = `(select distinct thread_id from analytics_messages where _deleted_at is null and message_date between $1 and $2)`;
    const statuses = await q<{ status: string; n: number }>(
      `select t.enrich_status as status, count(*) as n from threads t where t.thread_id in ${inRange} group by 1 order by 2 desc, 1`,
      [all.from, all.to],
    );
    expect((await rowsOf(page, 'statuses')).map((r) => [r.status, num(r.threads)])).toEqual(
      statuses.map((s) => [s.status, s.n]),
    );
    const shownDepth = await rowsOf(page, 'depth');
    expect(shownDepth.reduce((s, r) => s + num(r.threads), 0)).toBe((await totalsBySql(all)).threads);
    const [deep] = await q<{ n: number }>(
      `select count(*) as n from ${inRange} r where (select count(*) from thread_messages h where h.thread_id = r.thread_id) between 3 and 5`,
      [all.from, all.to],
    );
    expect(num(shownDepth.find((r) => r.bucket === '3-5')?.threads ?? '0')).toBe(deep?.n);
    const busiest = await q<{ id: string; messages: number; entries: number; citations: number }>(
      `select a.thread_id::text as id, count(*) as messages,
              (select count(*) from thread_messages h where h.thread_id = a.thread_id) as entries,
              (select count(*) from citations c where c.thread_id = a.thread_id) as citations
         from analytics_messages a where a._deleted_at is null and a.message_date between $1 and $2
        group by a.thread_id order by count(*) desc, a.thread_id limit 25`,
      [all.from, all.to],
    );
    expect(
      (await rowsOf(page, 'topThreads')).map((r) => [
        r.threadId,
        num(r.messages),
        num(r.historyEntries),
        num(r.citations),
      ]),
    ).toEqual(busiest.map((b) => [b.id, b.messages, b.entries, b.citations]));
  });

  it('when the citations page is opened, then citations by type and the top sources equal the SQL, and the range changes them', async () => {
    // A citation counts on its entry's day; an artifact's, on the entry that named it; else on
    // its thread's first live message day.
    const bySql = async (r: { from: string; to: string }) =>
      q<{ type: string; n: number }>(
        `select coalesce(c.citation_type, '(none)') as type, count(*) as n
           from citations c
           left join artifacts ar on ar.artifact_id = c.artifact_id
           left join thread_messages h on h.message_id = coalesce(c.message_id, ar.message_id)
           left join (select thread_id, min(message_date) as first_day from analytics_messages
                       where _deleted_at is null group by thread_id) f on f.thread_id = c.thread_id
          where coalesce((h.created_at at time zone 'UTC')::date, f.first_day) between $1 and $2
          group by 1 order by 2 desc, 1`,
        [r.from, r.to],
      );
    expect(await open(page, `/citations?${qs(all)}`)).toBe(200);
    await shot('citations');
    expect(await errorPanels(page)).toEqual([]);
    const types = await bySql(all);
    expect(types.length).toBeGreaterThan(0);
    expect((await rowsOf(page, 'types')).map((r) => [r.citationType, num(r.citations)])).toEqual(
      types.map((t) => [t.type, t.n]),
    );
    expect(num(await figure(page, 'citations'))).toBe(types.reduce((s, t) => s + t.n, 0));
    expect(await page.$$eval('.chart[data-drawn] canvas', (c) => c.length)).toBe(1);
    const [top] = await q<{ type: string; name: string; n: number }>(
      `select coalesce(c.citation_type, '(none)') as type, coalesce(c.name, '(unnamed)') as name, count(*) as n
         from citations c left join artifacts ar on ar.artifact_id = c.artifact_id
         left join thread_messages h on h.message_id = coalesce(c.message_id, ar.message_id)
         left join (select thread_id, min(message_date) as first_day from analytics_messages
                     where _deleted_at is null group by thread_id) f on f.thread_id = c.thread_id
        where coalesce((h.created_at at time zone 'UTC')::date, f.first_day) between $1 and $2
        group by 1, 2 order by 3 desc, 1, 2 limit 1`,
      [all.from, all.to],
    );
    const [first] = await rowsOf(page, 'topSources');
    expect([first?.citationType, first?.name, num(first?.citations)]).toEqual([top?.type, top?.name, top?.n]);

    const one = { from: lw.days[3] as string, to: lw.days[3] as string };
    await open(page, `/citations?${qs(one)}`);
    const oneDay = await bySql(one);
    expect(num(await figure(page, 'citations'))).toBe(oneDay.reduce((s, t) => s + t.n, 0));
    expect(num(await figure(page, 'citations'))).toBeLessThan(types.reduce((s, t) => s + t.n, 0));
  });

  it('when the health page is opened, then watermark, failed day, held deletes, quarantine, backlog and runs equal the ledger', async () => {
    expect(await open(page, `/health?${qs({ from: all.from, to: lw.failedDay })}`)).toBe(200);
    await shot('health');
    expect(await errorPanels(page)).toEqual([]);
    const [h] = await q<{ watermark: string | null; lag: number | null; open: number; pending: number }>(
      `select watermark::text as watermark, lag_days as lag, open_rejects as open, threads_pending as pending from sync_health`,
    );
    expect(await figure(page, 'watermark')).toBe(h?.watermark);
    expect((await figure(page, 'lag')).startsWith(String(h?.lag))).toBe(true);
    expect(num(await figure(page, 'openRejects'))).toBe(h?.open);
    expect(num(await figure(page, 'failedDays'))).toBe(1);
    const failed = await rowsOf(page, 'failedDays');
    const [fd] = await q<{ day: string; last_error: string }>(
      `select day::text as day, last_error from sync_days where status = 'failed'`,
    );
    expect(failed.map((f) => [f.day, f.lastError])).toEqual([[fd?.day, fd?.last_error]]);
    expect(fd?.day).toBe(lw.failedDay);

    const [held] = await q<{ n: number }>(`select count(*) as n from held_deletes where day = $1`, [
      lw.heldDay,
    ]);
    expect((await rowsOf(page, 'heldDeletes')).map((r) => [r.day, num(r.rows)])).toEqual([
      [lw.heldDay, held?.n],
    ]);
    expect(num(await figure(page, 'heldDeletes'))).toBe(held?.n);

    const codes = await q<{ source: string; code: string; open: number }>(
      `select source, error_code as code, count(*) filter (where replayed_at is null) as open
         from rejected_records group by 1, 2 order by 3 desc, 1, 2`,
    );
    const shownCodes = await rowsOf(page, 'quarantine');
    expect(shownCodes.map((r) => [r.source, r.errorCode, num(r.open)])).toEqual(
      codes.map((c) => [c.source, c.code, c.open]),
    );
    // Each code shows an example with its raw text.
    expect(
      await page.$$eval('table[data-table="quarantine"] tbody tr', (trs) =>
        trs.every((tr) => tr.querySelector('.example pre') !== null),
      ),
    ).toBe(true);

    const statuses = await q<{ status: string; n: number }>(
      `select enrich_status as status, count(*) as n from threads group by 1 order by 2 desc, 1`,
    );
    expect((await rowsOf(page, 'threadStatuses')).map((r) => [r.status, num(r.threads)])).toEqual(
      statuses.map((s) => [s.status, s.n]),
    );
    expect(num(await figure(page, 'backlog'))).toBe(h?.pending);

    const runs = await q<{ id: string; status: string }>(
      `select load_id as id, status from sync_runs order by started_at desc, load_id desc`,
    );
    expect((await rowsOf(page, 'runs')).map((r) => [r.loadId, r.status])).toEqual(
      runs.map((r) => [r.id, r.status]),
    );
    expect(runs.map((r) => r.status)).toContain('failed');

    const days = await q<{ status: string; n: number }>(
      `select status, count(*) as n from sync_days where day between $1 and $2 group by 1 order by 1`,
      [all.from, lw.failedDay],
    );
    expect((await rowsOf(page, 'days')).length).toBe(days.reduce((s, d) => s + d.n, 0));
  });

  it('when a range holds no rows, then the page says so with the range and the span the warehouse has', async () => {
    expect(await open(page, '/usage?from=2020-01-01&to=2020-01-31')).toBe(200);
    const text = await page.$eval('[data-notice="no-rows"]', (el) => el.textContent ?? '');
    expect(text).toContain('The warehouse has no rows between 2020-01-01 and 2020-01-31.');
    expect(text).toContain(`Its live rows span ${all.from} to ${all.to}`);
    expect(num(await figure(page, 'messages'))).toBe(0);
  });

  it('when the range in the address is not a date, then the page answers 400 and says which bound is wrong', async () => {
    expect(await open(page, '/usage?from=2026-02-30&to=2026-03-01')).toBe(400);
    expect((await errorPanels(page)).join(' ')).toContain(
      'from="2026-02-30" is not a day in the form YYYY-MM-DD',
    );
  });

  it('when the JSON endpoint is asked, then it holds the same figures as the page', async () => {
    const r = await fetch(`${dash.url}/api/usage?${qs(all)}`);
    expect(r.status).toBe(200);
    const body = (await r.json()) as {
      range: unknown;
      sections: { totals: { ok: boolean; data: { messages: number } } };
    };
    expect(body.range).toEqual(all);
    expect(body.sections.totals).toEqual({
      ok: true,
      data: expect.objectContaining({ messages: (await totalsBySql(all)).messages }),
    });
  });

  it('when something other than GET or HEAD is sent, then the dashboard refuses it (read-only)', async () => {
    const r = await fetch(`${dash.url}/usage`, { method: 'POST', body: 'x' });
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toBe('GET, HEAD');
  });

  it('when the page is served, then uPlot comes from the dashboard itself, not from another host', async () => {
    await open(page, `/usage?${qs(all)}`);
    const scripts = await page.$$eval('script[src], link[href]', (els) =>
      els.map((e) => e.getAttribute('src') ?? e.getAttribute('href') ?? ''),
    );
    expect(scripts.filter((s) => /^(https?:)?\/\//.test(s))).toEqual([]);
    expect(await page.evaluate(() => typeof (globalThis as { uPlot?: unknown }).uPlot)).toBe('function');
  });
});

describe('the dashboard when the warehouse fails', () => {
  let broken: TestWarehouse;
  let brokenDash: Dashboard;
  beforeAll(async () => {
    broken = await createTestWarehouse({ prefix: 'dashbad' });
    brokenDash = await startDashboard({ pool: broken.w.pool, port: 0 });
  });
  afterAll(async () => {
    await brokenDash?.close();
    await broken?.dispose();
  });

  it('when a rollup refresh is due, then the pages read the marked days raw and say so', async () => {
    // What a load leaves between its commit and its refresh: a day marked for the rollups.
    await sql`insert into rollup_dirty_days values (date '2026-11-02')`.execute(broken.w.db);
    try {
      expect((await page.goto(`${brokenDash.url}/threads?from=2026-11-01&to=2026-11-07`))?.status()).toBe(
        200,
      );
      expect(await page.$eval('[data-source]', (e) => e.getAttribute('data-source'))).toBe('mixed');
      expect(await errorPanels(page)).toEqual([]);
      const api = (await (
        await fetch(`${brokenDash.url}/api/usage?from=2026-11-01&to=2026-11-07`)
      ).json()) as {
        source: string;
      };
      expect(api.source).toBe('mixed');
    } finally {
      await sql`delete from rollup_dirty_days`.execute(broken.w.db);
    }
    await page.goto(`${brokenDash.url}/threads?from=2026-11-01&to=2026-11-07`);
    expect(await page.$eval('[data-source]', (e) => e.getAttribute('data-source'))).toBe('rollup');
  });

  it('when a table a query reads was dropped, then that part shows an error panel naming it and the rest of the page still shows', async () => {
    await sql`drop table rollup_user_daily cascade`.execute(broken.w.db);
    const res = await page.goto(`${brokenDash.url}/usage?from=2026-11-01&to=2026-11-07`, {
      waitUntil: 'load',
    });
    expect(res?.status()).toBe(200);
    await page.screenshot({ path: path.join(SHOTS, 'error-dropped-table.png'), fullPage: true });
    const panels = await page.$$eval('[data-error]', (els) =>
      els.map((e) => [e.getAttribute('data-error'), e.textContent ?? '']),
    );
    expect(panels).toHaveLength(1);
    expect(panels[0]?.[0]).toBe('totals');
    expect(panels[0]?.[1]).toContain('relation "rollup_user_daily" does not exist');
    expect(panels[0]?.[1]).toContain('crs-sync migrate');
    // The days come from another table: that part still shows (an empty warehouse: no day).
    expect(await page.$eval('[data-empty="daily"]', (e) => e.textContent)).toBe(
      'No day of the range has messages.',
    );
  });

  it('when the warehouse cannot be reached, then every page says so, answers 503 and shows no password', async () => {
    const password = 'pw-DashboardSecret-93';
    // A port nothing listens on: the closed database.
    const gone = openWarehouse({ url: `postgres://crs:${password}@127.0.0.1:1/crs`, schema: 'crs', max: 1 });
    const goneDash = await startDashboard({ pool: gone.pool, port: 0 });
    try {
      for (const name of ['usage', 'health']) {
        const res = await page.goto(`${goneDash.url}/${name}`, { waitUntil: 'load' });
        expect(res?.status()).toBe(503);
        const html = await page.content();
        expect((await errorPanels(page)).join(' ')).toMatch(/cannot reach the warehouse: .*ECONNREFUSED/);
        expect(html).not.toContain(password);
      }
      await page.screenshot({ path: path.join(SHOTS, 'error-unreachable.png'), fullPage: true });
      const api = await fetch(`${goneDash.url}/api/usage`);
      expect(api.status).toBe(503);
      expect(((await api.json()) as { error: string }).error).toContain('cannot reach the warehouse');
    } finally {
      await goneDash.close();
      await gone.close();
    }
  });
});
