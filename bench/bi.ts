/**
 * BI benchmark: a warehouse of ≥ 10M analytics rows (and proportional threads, history entries,
 * citations, artifacts), the dashboard's queries and the BI views timed over the raw tables and
 * over the rollups side by side, the rollups' cost to the loader (first load and unchanged
 * re-load of the same file, with and without rollup upkeep), and the measurements behind the
 * partitioning decision (docs/decisions/0010-rollups-and-partitioning.md).
 *
 *   npm run bench:bi -- [--rows N] [--days D] [--users U] [--loader-lines L] [--keep] [--reuse]
 *
 * Not part of the tests. Needs DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test);
 * everything lives in schemas named bench_bi*, dropped at the end unless --keep.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { MAX_SPAN_DAYS } from '../src/simulator/plan.ts';
import { openWarehouse, type Warehouse } from '../src/warehouse/db.ts';
import { migrateToLatest } from '../src/warehouse/migrator.ts';
import { ROLLUP_TABLES, rebuildRollups } from '../src/warehouse/rollups/rebuild.ts';
import { refreshRollups } from '../src/warehouse/rollups/refresh.ts';
import { type BiShape, generateWarehouse } from './lib/bi/generate.ts';
import { best, fmtMs, median, table, timeRuns, withRawViews } from './lib/bi/timing.ts';
import { describeUrl, dropSchemas } from './lib/db.ts';
import { ensureExport } from './lib/generate.ts';
import { importOurs, migrateOurs, THIS_CHECKOUT } from './lib/ours.ts';
import { isOutcome } from './lib/outcome.ts';

const OUT = path.resolve(import.meta.dirname, 'out');

const { values: flags } = parseArgs({
  options: {
    rows: { type: 'string', default: '10000000' },
    days: { type: 'string', default: '365' },
    users: { type: 'string', default: '20000' },
    'loader-lines': { type: 'string', default: '100000' },
    'loader-rounds': { type: 'string', default: '2' },
    'thread-days': { type: 'string' },
    schema: { type: 'string', default: 'bench_bi' },
    keep: { type: 'boolean', default: false },
    reuse: { type: 'boolean', default: false },
    'skip-loader': { type: 'boolean', default: false },
    'skip-partition': { type: 'boolean', default: false },
    'skip-queries': { type: 'boolean', default: false },
    'skip-dashboard': { type: 'boolean', default: false },
    pages: { type: 'boolean', default: false },
    'raw-all': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  console.log(
    'npm run bench:bi -- [--rows N (10000000)] [--days D (365)] [--users U (20000)]\n' +
      '                    [--loader-lines L (100000): the file of the loader-cost runs] [--loader-rounds R (2)]\n' +
      '                    [--thread-days D|any: only that loader-cost file (default both: threads of ~3 days, as the\n' +
      "                     simulator's, and any line in any thread, every thread on ~22 of the 30 days)]\n" +
      '                    [--schema S (bench_bi)] [--keep (leave the schemas)] [--reuse (a kept S: no generation)]\n' +
      '                    [--skip-queries] [--skip-dashboard] [--skip-partition] [--skip-loader]\n' +
      '                    [--pages (each dashboard page loaded in headless Chromium, 30 days and all)]\n' +
      '                    [--raw-all (dashboard: time the raw queries over all days too: minutes per query)]',
  );
  process.exit(0);
}

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const shape: BiShape = {
  rows: Number(flags.rows),
  days: Number(flags.days),
  users: Number(flags.users),
  lastDay: '2026-11-22',
};
const SCHEMA = flags.schema;
const MONTH_SCHEMA = `${SCHEMA}_month`;
const LOAD_ON = `${SCHEMA}_load_on`;
const LOAD_OFF = `${SCHEMA}_load_off`;
const report: string[] = [];
const say = (s: string) => {
  console.log(s);
  report.push(s);
};
const progress = (s: string) => process.stderr.write(`  ${s}\n`);
const load = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

async function open(schema: string): Promise<Warehouse> {
  const w = openWarehouse({ url, schema, max: 4, timeouts: { statementMs: 0, lockMs: 0, idleTxMs: 0 } });
  await migrateToLatest(w);
  return w;
}

function dayMinus(day: string, n: number): string {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() - n);
  return d.toISOString().slice(0, 10);
}

async function build(w: Warehouse, s: BiShape, label: string): Promise<{ genMs: number; rebuildMs: number }> {
  const c = await w.pool.connect();
  const t0 = performance.now();
  try {
    await generateWarehouse(c, s, (p) => progress(`${label}: ${p} (${fmtMs(performance.now() - t0)})`));
  } finally {
    c.release();
  }
  const genMs = performance.now() - t0;
  const t1 = performance.now();
  await rebuildRollups(w.pool, null, (t) =>
    progress(`${label}: rebuild ${t} (${fmtMs(performance.now() - t1)})`),
  );
  const rebuildMs = performance.now() - t1;
  for (const t of ROLLUP_TABLES) await w.pool.query(`vacuum analyze ${t}`);
  return { genMs, rebuildMs };
}

async function sizes(w: Warehouse): Promise<string[][]> {
  const r = await w.pool.query<{ t: string; rows: string; mb: string }>(
    `select c.relname as t, c.reltuples::bigint::text as rows,
            round(pg_total_relation_size(c.oid) / 1048576.0)::text as mb
     from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = current_schema() and c.relkind = 'r'
       and (c.relname like 'rollup_%' or c.relname in
            ('analytics_messages', 'threads', 'thread_messages', 'citations', 'artifacts'))
     order by pg_total_relation_size(c.oid) desc`,
  );
  return r.rows.filter((x) => !x.t.startsWith('rollup_dirty')).map((x) => [x.t, x.rows, x.mb]);
}

/** The BI views over the raw tables vs over the rollups. */
async function viewTimings(w: Warehouse): Promise<string[][]> {
  const last = shape.lastDay;
  const month = dayMinus(last, 29);
  const queries: Array<[string, string]> = [
    ['daily_usage (all days)', 'select * from daily_usage order by message_date'],
    [
      `daily_usage (30 days)`,
      `select * from daily_usage where message_date between '${month}' and '${last}'`,
    ],
    ['user_activity top 10', 'select * from user_activity order by messages desc, user_id limit 10'],
    [
      'user_activity one user',
      `select * from user_activity where user_id = '20000000-0000-4000-8000-000000000007'`,
    ],
    ['thread_summary top 10', 'select * from thread_summary order by messages desc, thread_id limit 10'],
    [
      'citation_sources top 10',
      'select * from citation_sources order by citations desc, citation_type, name limit 10',
    ],
  ];
  const out: string[][] = [];
  for (const [name, text] of queries) {
    const fast = await timeRuns(5, () => w.pool.query(text).then((r) => JSON.stringify(r.rows)));
    const raw = await withRawViews(w.pool, (c) =>
      timeRuns(1, () => c.query(text).then((r) => JSON.stringify(r.rows))),
    );
    const f = median(fast.ms);
    const r = best(raw.ms);
    out.push([name, fmtMs(r), fmtMs(f), `${(r / f).toFixed(0)}x`, fast.result === raw.result ? 'yes' : 'NO']);
    progress(`view ${name}: raw ${fmtMs(r)}, rollups ${fmtMs(f)}`);
  }
  return out;
}

type QueryFn = (q: pg.Pool | pg.PoolClient, r: { from: string; to: string }) => Promise<unknown>;

/** The dashboard's queries (src/warehouse/read/): over rollups, and their raw versions. */
async function dashboardTimings(
  w: Warehouse,
): Promise<{ rows: string[][]; worstMs: number; worstRatio: number }> {
  const mod = (await import('../src/warehouse/read/query-sets.ts')) as Record<string, unknown>;
  const fast = mod.DASHBOARD_QUERIES as Record<string, QueryFn>;
  const raw = (mod.RAW_DASHBOARD_QUERIES ?? null) as Record<string, QueryFn> | null;
  const ranges: Array<[string, { from: string; to: string }]> = [
    ['30 days', { from: dayMinus(shape.lastDay, 29), to: shape.lastDay }],
    ['all', { from: dayMinus(shape.lastDay, shape.days - 1), to: shape.lastDay }],
  ];
  const rows: string[][] = [];
  let worstMs = 0;
  let worstRatio = Number.POSITIVE_INFINITY;
  for (const [rname, range] of ranges) {
    for (const [name, fn] of Object.entries(fast)) {
      const f = await timeRuns(5, async () => JSON.stringify(await fn(w.pool, range)));
      const fm = median(f.ms);
      worstMs = Math.max(worstMs, fm);
      const rawFn = rname === 'all' && !flags['raw-all'] ? undefined : raw?.[name];
      if (!rawFn) {
        rows.push([name, rname, '–', fmtMs(fm), '–', '–']);
        continue;
      }
      const r = await withRawViews(w.pool, (c) =>
        timeRuns(1, async () => JSON.stringify(await rawFn(c, range))),
      );
      const rm = best(r.ms);
      const ratio = rm / fm;
      // Queries of the sync's state (ledger, runs, quarantine) read small tables either way, and a
      // query already within 200 ms over the raw tables (dataExtent: two index ends) needs no
      // rollup: the 20x target is for the ones that do.
      if (rawFn !== fn && rm > 200) worstRatio = Math.min(worstRatio, ratio);
      rows.push([
        name,
        rname,
        fmtMs(rm),
        fmtMs(fm),
        rawFn === fn ? 'same query' : `${ratio.toFixed(0)}x`,
        f.result === r.result ? 'yes' : 'NO',
      ]);
      progress(`dashboard ${name} (${rname}): raw ${fmtMs(rm)}, rollups ${fmtMs(fm)}`);
    }
  }
  return { rows, worstMs, worstRatio };
}

/** Each dashboard page (src/dashboard) over the warehouse, as a browser loads it. */
async function pageTimings(w: Warehouse): Promise<string[][]> {
  const { startDashboard } = await import('../src/dashboard/server.ts');
  const { measurePageLoads } = await import('../src/dashboard/page-load.ts');
  const dash = await startDashboard({ pool: w.pool, port: 0 });
  const out: string[][] = [];
  try {
    const ranges: Array<[string, string]> = [
      ['30 days', `from=${dayMinus(shape.lastDay, 29)}&to=${shape.lastDay}`],
      ['all', `from=${dayMinus(shape.lastDay, shape.days - 1)}&to=${shape.lastDay}`],
    ];
    for (const [rname, query] of ranges) {
      for (const p of await measurePageLoads({ baseUrl: dash.url, query, runs: 5 })) {
        out.push([p.page, rname, fmtMs(p.ms), p.dbMs === null ? '–' : fmtMs(p.dbMs)]);
        progress(`page ${p.page} (${rname}): ${fmtMs(p.ms)}`);
      }
    }
  } finally {
    await dash.close();
  }
  return out;
}

/** Per-day work of loads and refreshes on the whole table vs on a table of one month's rows. */
async function partitionTimings(big: Warehouse, month: Warehouse): Promise<string[][]> {
  const day = dayMinus(shape.lastDay, 10);
  const ids = (w: Warehouse) =>
    w.pool
      .query<{ id: string }>(
        `select message_id::text as id from analytics_messages where message_date = $1 order by message_id limit 1000`,
        [day],
      )
      .then((r) => r.rows.map((x) => x.id));
  const bigIds = await ids(big);
  const monthIds = await ids(month);
  const ops: Array<[string, (w: Warehouse, idList: string[]) => Promise<unknown>]> = [
    [
      "a day's live rows (finalize, delete guard)",
      (w) =>
        w.pool.query(
          `select count(*) from analytics_messages where message_date = $1 and _deleted_at is null`,
          [day],
        ),
    ],
    [
      'merge lookup of 1,000 ids (a batch)',
      (w, l) =>
        w.pool.query(
          'select message_id, record_hash, _deleted_at is not null, line_hash, message_date from analytics_messages where message_id = any($1::uuid[])',
          [l],
        ),
    ],
    ['rollup refresh of one day and its threads', (w) => rebuildRollups(w.pool, { from: day, to: day })],
    [
      'raw daily_usage of 30 days',
      (w) =>
        withRawViews(w.pool, (c) =>
          c.query(`select * from daily_usage where message_date between $1 and $2`, [dayMinus(day, 29), day]),
        ),
    ],
  ];
  const out: string[][] = [];
  for (const [name, op] of ops) {
    const b = await timeRuns(5, () => op(big, bigIds));
    const m = await timeRuns(5, () => op(month, monthIds));
    out.push([name, fmtMs(median(b.ms)), fmtMs(median(m.ms)), `${(median(b.ms) / median(m.ms)).toFixed(2)}`]);
    progress(`partition ${name}: whole ${fmtMs(median(b.ms))}, one month ${fmtMs(median(m.ms))}`);
  }
  return out;
}

async function withCheckpoint(): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('checkpoint');
  } finally {
    await c.end();
  }
}

/** First load and unchanged re-load of one file, rollup upkeep on and off, alternating. */
async function loaderTimings(lines: number, threadDays: number | undefined): Promise<string[][]> {
  const file = ensureExport(OUT, lines, 1, threadDays);
  const rounds = Number(flags['loader-rounds']);
  const res: Record<string, number[]> = {};
  const add = (k: string, v: number) => {
    res[k] = [...(res[k] ?? []), v];
  };
  for (let round = 0; round < rounds; round++) {
    await dropSchemas(url, [LOAD_ON, LOAD_OFF]);
    for (const s of [LOAD_ON, LOAD_OFF]) {
      const err = await migrateOurs(url, s, THIS_CHECKOUT);
      if (err) throw new Error(err);
    }
    // Upkeep off: no marks are written, so the finalize's refresh finds nothing to do; and the
    // rollups are flagged for a rebuild, as on a warehouse without them, so the finalize computes
    // the queued threads' aggregates from the raw rows (with current rollups it copies them from
    // rollup_threads: without the flag "off" would skip that work and look too cheap).
    const off = new pg.Client({ connectionString: url });
    await off.connect();
    for (const t of ['analytics_messages', 'thread_messages', 'citations', 'artifacts', 'threads']) {
      await off.query(`alter table ${LOAD_OFF}.${t} disable trigger user`);
    }
    await off.query(`update ${LOAD_OFF}.rollup_state set rebuild_needed = true`);
    await off.end();
    const order = round % 2 === 0 ? [LOAD_ON, LOAD_OFF] : [LOAD_OFF, LOAD_ON];
    for (const kind of ['inserted', 'unchanged'] as const) {
      for (const s of order) {
        // Each import starts after a checkpoint, as bench:ingest's contestants do: otherwise one
        // pays for writing out the dirty pages the one before it left.
        await withCheckpoint();
        const r = await importOurs(`${s} ${kind}`, file.path, lines, url, s, kind, THIS_CHECKOUT);
        if (!isOutcome(r)) throw new Error(r.reason);
        if (r.notes.length > 0) progress(r.notes.join('; '));
        add(`${s === LOAD_ON ? 'on' : 'off'} ${kind}`, r.seconds);
        progress(`loader ${s} ${kind}: ${r.seconds.toFixed(2)} s (load ${load()})`);
      }
    }
  }
  const row = (label: string, kind: string): string[] => {
    const ons = res[`on ${kind}`] ?? [];
    const offs = res[`off ${kind}`] ?? [];
    const on = median(ons);
    const offS = median(offs);
    // Each round's two runs ran back to back: their ratio is less moved by the machine's drift
    // over the rounds than the ratio of the medians.
    const paired = median(ons.map((x, i) => (x - (offs[i] ?? x)) / (offs[i] ?? x)));
    return [
      label,
      `${offS.toFixed(2)} s`,
      `${on.toFixed(2)} s`,
      `${(((on - offS) / offS) * 100).toFixed(1)}%`,
      `${(paired * 100).toFixed(1)}%`,
      (res[`off ${kind}`] ?? []).map((x) => x.toFixed(2)).join(' / '),
      (res[`on ${kind}`] ?? []).map((x) => x.toFixed(2)).join(' / '),
    ];
  };
  return [
    row(
      `first load (${lines} lines, ${(file.bytes / 1e6).toFixed(0)} MB, ${threadDays ? `threads of ~${threadDays} days` : 'any thread any day'})`,
      'inserted',
    ),
    row(`unchanged re-load${threadDays ? `, threads of ~${threadDays} days` : ''}`, 'unchanged'),
  ];
}

async function main(): Promise<void> {
  say(`# bench:bi — ${new Date().toISOString()}`);
  say(`database ${describeUrl(url)}, ${os.cpus().length} cores, load average at start ${load()}`);
  say(
    `shape: ${shape.rows} analytics rows over ${shape.days} days ending ${shape.lastDay}, ${shape.users} users\n`,
  );
  if (!flags.reuse) await dropSchemas(url, [SCHEMA]);
  const big = await open(SCHEMA);
  let month: Warehouse | null = null;
  try {
    if (!flags.reuse) {
      const { genMs, rebuildMs } = await build(big, shape, 'warehouse');
      say(`generated in ${fmtMs(genMs)}; full rollup rebuild ${fmtMs(rebuildMs)} (load ${load()})\n`);
    } else {
      const r = await refreshRollups(big.pool);
      // open() migrated the kept schema to this checkout's views; re-creating them from the
      // rollups migration would undo a later migration's view (daily_usage, 2026-11-25T08).
      // A migration may have filled a rollup table just now: index-only reads need its visibility map.
      for (const t of ROLLUP_TABLES) await big.pool.query(`vacuum analyze ${t}`);
      say(`reused schema ${SCHEMA} (refresh: ${JSON.stringify(r)})\n`);
    }
    if (!flags['skip-queries']) {
      say('## Sizes\n');
      say(table(['table', 'rows (estimate)', 'MB with indexes'], await sizes(big)));

      say(`\n## BI views: raw tables vs rollups (load ${load()})\n`);
      say('raw: one run (a 10M-row scan each); rollups: median of 5 runs; "same" = identical rows.\n');
      say(table(['query', 'raw', 'rollups', 'speed-up', 'same'], await viewTimings(big)));
    }
    if (!flags['skip-queries'] && !flags['skip-dashboard']) {
      say(`\n## Dashboard queries (src/warehouse/read/): raw vs rollups (load ${load()})\n`);
      const d = await dashboardTimings(big);
      say(table(['query', 'range', 'raw', 'rollups', 'speed-up', 'same'], d.rows));
      say(
        `\nslowest dashboard query over rollups: ${fmtMs(d.worstMs)} (target ≤ 200 ms); smallest speed-up of a query that is over 200 ms on the raw tables: ${
          Number.isFinite(d.worstRatio) ? `${d.worstRatio.toFixed(0)}x` : 'n/a'
        } (target ≥ 20x)`,
      );
    }

    if (flags.pages) {
      say(`\n## Dashboard pages in headless Chromium (median of 5 after a warm-up; load ${load()})\n`);
      say(table(['page', 'range', 'load', 'server queries'], await pageTimings(big)));
    }

    if (!flags['skip-partition']) {
      const monthShape: BiShape = { ...shape, rows: Math.round((shape.rows * 30) / shape.days), days: 30 };
      await dropSchemas(url, [MONTH_SCHEMA]);
      month = await open(MONTH_SCHEMA);
      await build(month, monthShape, 'one-month table');
      say(
        `\n## Partitioning by month: per-day work on the whole table vs a table of one month (load ${load()})\n`,
      );
      say(
        `the one-month table holds ${monthShape.rows} rows at the same rows per day: what a month partition would hold.\n`,
      );
      say(table(['operation', 'whole table', 'one month', 'ratio'], await partitionTimings(big, month)));
    }

    if (!flags['skip-loader']) {
      const lines = Number(flags['loader-lines']);
      say(
        `\n## Loader cost of rollup upkeep (crs-sync import, same file, ${flags['loader-rounds']} rounds alternating; load ${load()})\n`,
      );
      // Two files by default: threads that live a few days, as the simulator's do (turns on a
      // thread's first day or the MAX_SPAN_DAYS after it), and any line in any thread (every
      // thread on ~22 of the 30 days): the upkeep's cost grows with the thread-days a load writes.
      const shapes =
        flags['thread-days'] === undefined
          ? [MAX_SPAN_DAYS, undefined]
          : [flags['thread-days'] === 'any' ? undefined : Number(flags['thread-days'])];
      const rows: string[][] = [];
      for (const d of shapes) rows.push(...(await loaderTimings(lines, d)));
      say(
        table(
          [
            'load',
            'upkeep off',
            'upkeep on',
            'cost (medians)',
            'cost (median of rounds)',
            'runs off',
            'runs on',
          ],
          rows,
        ),
      );
    }
    say(`\nload average at end ${load()}`);
  } finally {
    await big.close();
    await month?.close();
    mkdirSync(OUT, { recursive: true });
    const out = path.join(OUT, 'bi-report.md');
    writeFileSync(out, `${report.join('\n')}\n`);
    console.error(`report written to ${out}`);
    if (!flags.keep) await dropSchemas(url, [SCHEMA, MONTH_SCHEMA, LOAD_ON, LOAD_OFF]);
    else await dropSchemas(url, [LOAD_ON, LOAD_OFF]);
  }
}

await main();
