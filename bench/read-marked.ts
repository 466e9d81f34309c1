/**
 * bench:read-marked — every dashboard query and the BI views over bench:bi's kept warehouse
 * while one day is marked (a load's batch committed, its refresh not yet run): before (the raw
 * tables, as readers read them while anything was marked) and after (the rollups for the current
 * days, the marked day raw: readSource's `mixed`), and each dashboard page's sum of its queries.
 * All in one transaction that marks the last day and its threads (a load marks both) and applies
 * the view migrations the schema has not run, rolled back at the end: the kept schema is left as
 * it was.
 *
 *   node bench/read-marked.ts [--schema bench_bi] [--days 30] [--runs 3] [--only a,b] [--all] [--raw-timeout 300]
 *
 * Needs DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) and a schema made by
 * `npm run bench:bi -- --keep`. Not part of the tests.
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { up as viewsFollowMarks } from '../migrations/2026-11-25T08-00-00_daily_usage_follows_marks.ts';
import { up as entityViewsFollowMarks } from '../migrations/2026-11-25T12-00-00_entity_views_follow_marks.ts';
// For its type parsers: bigint counts as numbers, days as text, as every reader gets them (without
// them threadBreakdown's sums in TypeScript joined strings, and its forms compared different).
import '../src/warehouse/db.ts';
import { dataSpan, MIXED_DASHBOARD_QUERIES, RAW_DASHBOARD_QUERIES } from '../src/warehouse/read/index.ts';
import { fmtMs, median, table, timeRuns } from './lib/bi/timing.ts';

const { values: flags } = parseArgs({
  options: {
    schema: { type: 'string', default: 'bench_bi' },
    days: { type: 'string', default: '30' },
    runs: { type: 'string', default: '3' },
    // Only these queries (comma-separated names): the raw forms of some take 30 s each here.
    only: { type: 'string' },
    // Every day with data as the range (the dashboard's "all") instead of the last --days.
    all: { type: 'boolean', default: false },
    // Seconds a raw (before) form may take before it is given up.
    'raw-timeout': { type: 'string', default: '300' },
    help: { type: 'boolean', default: false },
  },
});
if (flags.help) {
  console.log(
    'node bench/read-marked.ts [--schema bench_bi] [--days 30] [--runs 3] [--only name,name] [--all] [--raw-timeout 300]\n' +
      'Marks the last day of a bench:bi schema (and its threads) in a transaction rolled back at the end,\n' +
      'and times each dashboard query and BI view raw (before) and mixed (after).',
  );
  process.exit(0);
}
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const runs = Number(flags.runs);
const span = Number(flags.days);

const client = new pg.Client({
  connectionString: url,
  options: `-c search_path=${flags.schema},${flags.schema}_internal`,
});
await client.connect();
// One connection for kysely too, so the migration runs inside the transaction it is rolled back with.
const db = new Kysely<unknown>({
  dialect: new PostgresDialect({
    pool: { connect: async () => Object.assign(client, { release: () => {} }), end: async () => {} } as never,
  }),
});
try {
  await client.query('begin');
  // As the dashboard's snapshot (src/warehouse/read/snapshot.ts): no JIT.
  await client.query(`set local statement_timeout = '600s'; set local jit = off`);
  // The view migrations this schema has not run, applied inside the transaction.
  const ran = new Set(
    (await client.query<{ name: string }>('select name from kysely_migration')).rows.map((r) => r.name),
  );
  if (!ran.has('2026-11-25T08-00-00_daily_usage_follows_marks')) await viewsFollowMarks(db);
  if (!ran.has('2026-11-25T12-00-00_entity_views_follow_marks')) await entityViewsFollowMarks(db);
  const [last] = (await client.query<{ d: string }>('select max(message_date)::text as d from rollup_daily'))
    .rows;
  if (!last?.d)
    throw new Error(`schema ${flags.schema} has no rollup rows: run npm run bench:bi -- --keep first`);
  const range = {
    from: flags.all
      ? ((await client.query<{ d: string }>('select min(message_date)::text as d from rollup_daily')).rows[0]
          ?.d as string)
      : ((await client.query<{ d: string }>(`select ($1::date - $2::int)::text as d`, [last.d, span - 1]))
          .rows[0]?.d as string),
    to: last.d,
  };
  const rows = (
    await client.query<{ n: string }>(
      'select count(*) as n from analytics_messages where message_date = $1',
      [last.d],
    )
  ).rows;
  // What a load of the day leaves marked until its refresh: the day and the threads it wrote.
  await client.query('insert into rollup_dirty_days values ($1)', [last.d]);
  const threads = await client.query(
    'insert into rollup_dirty_threads select distinct thread_id from analytics_messages where message_date = $1',
    [last.d],
  );
  const load = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  console.log(
    `## Readers with one day marked (${last.d}, ${rows[0]?.n} rows, ${threads.rowCount} threads), range ${range.from} … ${range.to}\n` +
      `before: the raw tables (one run); after: rollups + the marked day raw (median of ${runs}); "same" = identical rows. ` +
      `Load average ${load} at the start.\n`,
  );
  const out: string[][] = [];
  const after: Record<string, number> = {};
  let slowest = { name: '', ms: 0 };
  const rawLimit = Number(flags['raw-timeout']);
  // The raw form under its own bound, in a savepoint: one that takes longer (threadBreakdown over
  // a year: more than 10 minutes) is shown as "> N s" and the others still run.
  const timedRaw = async (before: () => Promise<unknown>) => {
    await client.query(`savepoint raw; set local statement_timeout = '${rawLimit}s'`);
    try {
      const b = await timeRuns(1, before);
      await client.query(`release savepoint raw; set local statement_timeout = '600s'`);
      return { text: fmtMs(b.ms[0] ?? 0), result: JSON.stringify(b.result) };
    } catch (err) {
      if ((err as { code?: string }).code !== '57014') throw err;
      await client.query(`rollback to savepoint raw; set local statement_timeout = '600s'`);
      return { text: `> ${rawLimit} s`, result: undefined };
    }
  };
  const compare = async (name: string, before: () => Promise<unknown>, after_: () => Promise<unknown>) => {
    const b = await timedRaw(before);
    const a = await timeRuns(runs, after_);
    const ms = median(a.ms);
    after[name] = ms;
    if (ms > slowest.ms) slowest = { name, ms };
    const same =
      b.result === undefined ? 'n/a' : JSON.stringify(a.result) === b.result ? 'same' : 'DIFFERENT';
    out.push([name, b.text, fmtMs(ms), same]);
    console.error(`${name}: ${b.text} → ${fmtMs(ms)}`);
  };
  const only = flags.only?.split(',');
  for (const [name, mixed] of Object.entries(MIXED_DASHBOARD_QUERIES)) {
    if (only && !only.includes(name)) continue;
    const before = RAW_DASHBOARD_QUERIES[name];
    if (before)
      await compare(
        name,
        () => before(client, range),
        () => mixed(client, range),
      );
  }
  if (!only || only.includes('dataSpan')) {
    const extent = { firstDay: range.from, lastDay: range.to };
    await compare(
      'dataSpan',
      () => dataSpan(client, extent, 'raw'),
      () => dataSpan(client, extent, 'mixed'),
    );
  }
  const view = (text: string) => async () =>
    (
      await client.query(`${text} where message_date between $1 and $2 order by message_date`, [
        range.from,
        range.to,
      ])
    ).rows;
  const views: Array<[string, string, string]> = [
    ['view daily_usage', 'daily_usage', ''],
    ['view user_activity top 10', 'user_activity', 'order by messages desc, user_id limit 10'],
    // One user and one thread of the marked day: touched, so read from the marked day's rows.
    [
      'view user_activity one user',
      'user_activity',
      'where user_id = (select user_id from rollup_user_daily where message_date in (select day from rollup_dirty_days) order by messages desc, user_id limit 1)',
    ],
    ['view thread_summary top 10', 'thread_summary', 'order by messages desc, thread_id limit 10'],
    [
      'view thread_summary one thread',
      'thread_summary',
      'where thread_id = (select thread_id from rollup_thread_daily where message_date in (select day from rollup_dirty_days) order by messages desc, thread_id limit 1)',
    ],
    [
      'view citation_sources top 10',
      'citation_sources',
      'order by citations desc, citation_type, name limit 10',
    ],
  ];
  for (const [name, v, rest] of views) {
    if (only && !only.includes(name)) continue;
    if (v === 'daily_usage') {
      await compare(name, view('select * from rollup_raw_daily_usage()'), view('select * from daily_usage'));
      continue;
    }
    const rowsOf = (text: string) => async () => (await client.query(text)).rows;
    await compare(
      name,
      rowsOf(`select * from rollup_raw_${v}() ${rest}`),
      rowsOf(`select * from ${v} ${rest}`),
    );
  }
  console.log(table(['query', 'before', 'after', 'rows'], out));
  // Each page's queries one after the other, as the server runs them (src/dashboard/pages/),
  // with the extent and the span every ranged page reads first.
  const PAGES: Record<string, string[]> = {
    usage: ['usageTotals', 'usageDaily'],
    users: ['usageTotals', 'usageDaily', 'newUsersDaily', 'topUsers'],
    threads: ['usageDaily', 'threadBreakdown', 'topThreads'],
    citations: ['usageTotals', 'citationTypeTotals', 'citationTypesDaily', 'topCitationSources'],
  };
  const pages: string[][] = [];
  for (const [page, names] of Object.entries(PAGES)) {
    const parts = ['dataExtent', 'dataSpan', ...names];
    if (parts.some((n) => after[n] === undefined)) continue;
    pages.push([page, fmtMs(parts.reduce((sum, n) => sum + (after[n] ?? 0), 0))]);
  }
  if (pages.length > 0) console.log(`\n${table(['page (mixed, sum of its queries)', 'after'], pages)}`);
  console.log(`\nslowest after: ${slowest.name} ${fmtMs(slowest.ms)}`);
} finally {
  await client.query('rollback').catch(() => {});
  await client.end();
}
