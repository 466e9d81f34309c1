/**
 * The dashboard while an intraday pull loads: every page (HTML and /api/ JSON) over a kept
 * bench:bi warehouse, asked for the default range and for the whole data, first with no load
 * running, then over and over while an intraday pull of the open day (a 100k-row day by default,
 * pulled late in the day, so nearly all of it) loads into the same warehouse. The pull's writes of
 * its day wait for its finalize (decision 0015), so readers read the day from its rollups as the
 * earlier pull left it; it prints how many days were marked and waiting, and threads marked, while
 * it ran. Then the same requests with the day marked and nothing loading: the mixed forms' own cost
 * (rollups for the current days, raw rows for the marked one). Prints, per request, the quiet time
 * and the slowest and median times during the load, with the load average; the target (issue 23):
 * every page answers within 1 s.
 *
 *   node bench/dashboard-during-load.ts [--schema S (bench_bi)] [--rows-per-day N (100000)]
 *                                       [--at HH:MM (23:30)] [--first-at HH:MM|none (22:30)] [--seed N (23)]
 *
 * By default the day was pulled an hour before (--first-at, not timed), so the timed pull is an
 * hourly schedule's: the last hour's rows new, the rest read again unchanged (not written, not
 * marked). `--first-at none` times the day's first pull instead: every row new and marked, the
 * worst case (the intraday schedule turned on late in a day).
 *
 * Needs a warehouse `npm run bench:bi -- --keep` left (schema S), which it migrates to the latest
 * schema first (as `crs-sync migrate` would). The pull's rows, threads and
 * ledger rows are deleted afterwards and the rollups refreshed, so S is as it was. Not part of
 * the tests. DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test).
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { createServiceClient } from '../src/api/index.ts';
import { utcDay } from '../src/common/civil-date.ts';
import { openDayLoad } from '../src/common/load-target.ts';
import { parseConfig } from '../src/config.ts';
import { startDashboard } from '../src/dashboard/server.ts';
import { loadExportDay } from '../src/ingest/source/export-day.ts';
import { createLogger } from '../src/log.ts';
import { openWarehouse } from '../src/warehouse/db.ts';
import { migrateToLatest } from '../src/warehouse/migrator.ts';
import { refreshRollups } from '../src/warehouse/rollups/refresh.ts';
import { fmtMs, median, table } from './lib/bi/timing.ts';
import { type DashboardTiming, timeDashboardRequest } from './lib/dashboard-request.ts';
import { describeUrl } from './lib/db.ts';
import { startClockedSimulator } from './lib/intraday/sim.ts';

const { values: flags } = parseArgs({
  options: {
    schema: { type: 'string', default: 'bench_bi' },
    'rows-per-day': { type: 'string', default: '100000' },
    at: { type: 'string', default: '23:30' },
    'first-at': { type: 'string', default: '22:30' },
    seed: { type: 'string', default: '23' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  console.log(
    'node bench/dashboard-during-load.ts [--schema S (bench_bi)] [--rows-per-day N (100000)]\n' +
      '                                    [--at HH:MM (23:30): the simulated time of the timed pull]\n' +
      '                                    [--first-at HH:MM|none (22:30): an earlier pull of the day, not timed;\n' +
      "                                     none: the timed pull is the day's first, every row new]  [--seed N (23)]",
  );
  process.exit(0);
}

const TARGET_MS = 1_000;
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
// LOG_LEVEL=debug shows the loader's phases (the finalize's among them) on stderr.
const log = createLogger({ level: process.env.LOG_LEVEL ?? 'silent', pretty: false });
const progress = (s: string) => process.stderr.write(`  ${s}\n`);
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

const medianOrNaN = (xs: number[]) => (xs.length === 0 ? Number.NaN : median(xs));

async function main(): Promise<void> {
  const day = utcDay(new Date());
  const clock = Date.parse(`${day}T${flags.at}:00Z`);
  console.log(`# Dashboard during an intraday pull (${describeUrl(url)}, schema ${flags.schema})\n`);
  console.log(
    `open day ${day} pulled at ${flags.at} UTC (${flags['first-at'] === 'none' ? 'its first pull' : `pulled before at ${flags['first-at']}`}), ` +
      `${flags['rows-per-day']} rows/day; 2 cores, load average at start ${load()}`,
  );
  const w = openWarehouse({ url, schema: flags.schema, max: 5 });
  const loader = openWarehouse({ url, schema: flags.schema, max: 8 });
  // The pull writes with this code's loader, as a worker would after `crs-sync migrate`.
  await migrateToLatest(loader);
  const sim = await startClockedSimulator({
    seed: Number(flags.seed),
    days: 2,
    recordsPerDay: Number(flags['rows-per-day']),
    clock,
  });
  const dash = await startDashboard({ pool: w.pool, port: 0 });
  const loadId = `bench-dashboard-during-load-${randomUUID()}`;
  // Its own load id (a load key names a load's checkpoints: the same one would resume).
  const firstId = `${loadId}-first`;
  const config = parseConfig({ CRS_SCHEMA: flags.schema, ...sim.env });
  const client = createServiceClient({ ...config.api, concurrency: config.enrichConcurrency }, log);
  try {
    if (flags['first-at'] !== 'none') {
      await sim.setClock(Date.parse(`${day}T${flags['first-at']}:00Z`));
      const first = await loadExportDay(
        { warehouse: loader, client, config, log },
        { target: openDayLoad(firstId, day) },
      );
      const held = await loader.pool.query<{ n: string }>(
        'select count(*) as n from analytics_messages where message_date = $1 and _deleted_at is null',
        [day],
      );
      progress(
        `the earlier pull at ${flags['first-at']}: ${first.rowsRead} rows read, ${first.inserted} inserted; the day holds ${held.rows[0]?.n} (not timed)`,
      );
      await sim.setClock(clock);
    }
    const ext = await w.pool.query<{ first: string | null }>(
      'select min(message_date)::text as first from rollup_daily where messages > 0',
    );
    const first = ext.rows[0]?.first;
    if (!first) throw new Error(`schema ${flags.schema} has no data: run npm run bench:bi -- --keep first`);
    const targets = ['usage', 'users', 'threads', 'citations', 'health'].flatMap((p) =>
      ['', `?from=${first}&to=${day}`].flatMap((q) => [`/api/${p}${q}`, `/${p}${q}`]),
    );
    const quiet = new Map<string, DashboardTiming>();
    for (const t of targets) quiet.set(t, await timeDashboardRequest(dash.url, t));
    progress(`quiet round done (${targets.length} requests); the pull starts`);

    let loading = true;
    const t0 = performance.now();
    // When the pull's last line was committed (its last progress report, which the loader makes
    // once every line is merged): its finalize (delete step, thread queue, rollup refresh) runs
    // from there to its end.
    let merged = Number.NaN;
    const pull = loadExportDay(
      { warehouse: loader, client, config, log },
      {
        target: openDayLoad(loadId, day),
        onProgress: () => {
          merged = performance.now() - t0;
        },
      },
    ).finally(() => {
      loading = false;
    });
    const during = new Map<string, Array<DashboardTiming & { at: number }>>(targets.map((t) => [t, []]));
    // What the readers faced while the pull ran: the most days marked, days waiting (the pull's own
    // writes, decision 0015) and threads marked at any one look, every 100 ms.
    const faced = { marked: 0, waiting: 0, threads: 0 };
    const look = async () => {
      while (loading) {
        const r = await w.pool.query<{ marked: number; waiting: number; threads: number }>(
          `select (select count(distinct day) from rollup_dirty_days)::int as marked,
                  (select count(distinct day) from rollup_waiting_days)::int as waiting,
                  (select count(distinct thread_id) from rollup_dirty_threads)::int as threads`,
        );
        const x = r.rows[0];
        if (x) {
          faced.marked = Math.max(faced.marked, x.marked);
          faced.waiting = Math.max(faced.waiting, x.waiting);
          faced.threads = Math.max(faced.threads, x.threads);
        }
        await new Promise((ok) => setTimeout(ok, 100));
      }
    };
    const looking = look();
    let loadAvgDuring = '';
    while (loading) {
      for (const t of targets) {
        if (!loading) break;
        const at = performance.now() - t0;
        during.get(t)!.push({ ...(await timeDashboardRequest(dash.url, t)), at });
      }
      loadAvgDuring = load();
    }
    const counts = await pull;
    const pullMs = performance.now() - t0;
    await looking;
    console.log(
      `pull: ${counts.rowsRead} rows read, ${counts.inserted} inserted, ${counts.updated} updated, ` +
        `${counts.unchanged} unchanged, ${fmtMs(pullMs)}; load average at its end ${loadAvgDuring}\n` +
        `during it, at most: ${faced.marked} day(s) marked, ${faced.waiting} waiting for its finalize, ` +
        `${faced.threads} thread(s) marked\n`,
    );
    // The same requests with the open day marked but nothing loading: what the mixed forms cost by
    // themselves (as readers pay while a closed-day pull, or enrichment cancelling one of the
    // day's messages, marks it; an intraday pull's own writes wait instead, decision 0015).
    await loader.pool.query('insert into rollup_dirty_days (day) values ($1)', [day]);
    const marked = new Map<string, DashboardTiming>();
    for (const t of targets) marked.set(t, await timeDashboardRequest(dash.url, t));
    await refreshRollups(loader.pool);
    const rows = targets.map((t) => {
      const xs = during.get(t)!;
      const worst = xs.reduce<DashboardTiming | null>((a, x) => (a === null || x.ms > a.ms ? x : a), null);
      return {
        t,
        quiet: quiet.get(t)!,
        marked: marked.get(t)!,
        n: xs.length,
        p50: medianOrNaN(xs.map((x) => x.ms)),
        worst,
      };
    });
    console.log(
      table(
        [
          'request',
          'quiet ms',
          'day marked, no load: ms',
          'during: requests',
          'median ms',
          'slowest ms',
          'status',
          'failed sections',
        ],
        rows.map((r) => [
          r.t,
          r.quiet.ms.toFixed(0),
          r.marked.ms.toFixed(0),
          String(r.n),
          Number.isNaN(r.p50) ? '-' : r.p50.toFixed(0),
          r.worst ? r.worst.ms.toFixed(0) : '-',
          r.worst ? String(r.worst.status) : '-',
          r.worst ? String(r.worst.failed) : '-',
        ]),
      ),
    );
    const all = rows.flatMap((r) => during.get(r.t)!.map((x) => ({ t: r.t, ...x })));
    const slowest = [...all].sort((a, b) => b.ms - a.ms)[0];
    const slowestMarked = [...marked.entries()].sort((a, b) => b[1].ms - a[1].ms)[0];
    if (slowestMarked)
      console.log(
        `\nSlowest with the day marked and no load: ${slowestMarked[0]} ${slowestMarked[1].ms.toFixed(0)} ms`,
      );
    const missed = all.filter((x) => x.ms > TARGET_MS || x.status !== 200 || x.failed > 0);
    // Where in the pull the slow ones started: reading and merging lines, or its finalize.
    const phase = (at: number) => (Number.isNaN(merged) || at < merged ? 'merge' : 'finalize');
    console.log(
      `\nThe pull merged its last line at ${fmtMs(merged)} and ended at ${fmtMs(pullMs)}; requests over ${TARGET_MS} ms: ` +
        (missed.length === 0
          ? 'none'
          : missed
              .map((x) => `${x.t} ${x.ms.toFixed(0)} ms from ${fmtMs(x.at)} (${phase(x.at)})`)
              .join('; ')),
    );
    console.log(
      `\nSlowest during the pull: ${slowest ? `${slowest.t} ${slowest.ms.toFixed(0)} ms` : 'none (the pull ended first)'}`,
    );
    console.log(
      all.length === 0
        ? '\nNo request ran during the pull: use more rows per day.'
        : missed.length === 0
          ? `\nTarget met: all ${all.length} requests during the pull answered whole within ${TARGET_MS} ms.`
          : `\nTarget missed by ${missed.length} of ${all.length} requests: ${[...new Set(missed.map((x) => x.t))].join(', ')}`,
    );
    if (all.length === 0 || missed.length > 0) process.exitCode = 1;
  } finally {
    await dash.close();
    await sim.close();
    progress('removing the pull from the warehouse (its rows, threads, ledger) and refreshing the rollups');
    const ids = [firstId, loadId];
    await loader.pool.query('delete from analytics_messages where _load_id = any($1)', [ids]);
    await loader.pool.query('delete from threads where _load_id = any($1)', [ids]);
    await loader.pool.query('delete from rejected_records where _load_id = any($1)', [ids]);
    await loader.pool.query('delete from sync_days where day = $1', [day]);
    for (const t of ['load_checkpoints', 'load_day_counts', 'load_day_deletes'])
      await loader.pool.query(`delete from ${t} where load_key = any($1)`, [ids.map((id) => `${id}:${day}`)]);
    await refreshRollups(loader.pool);
    await loader.close();
    await w.close();
  }
}

await main();
