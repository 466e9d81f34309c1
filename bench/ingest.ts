/**
 * Ingest benchmark: our loader against two baselines on the same file and database.
 *
 *   npm run bench:ingest -- [--lines N] [--seed S] [--skip-psql] [--skip-dlt] [--rss-check] [--keep]
 *
 * See bench/README.md for what is measured and how to read the tables.
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { describeUrl, dropSchemas, withDb } from './lib/db.ts';
import { runDltBaseline } from './lib/dlt-baseline.ts';
import { type ExportFile, ensureExport } from './lib/generate.ts';
import { hasGnuTime } from './lib/measure.ts';
import { importOurs, migrateOurs, type OursTarget, THIS_CHECKOUT } from './lib/ours.ts';
import { type ContestResult, isOutcome, rowsPerS } from './lib/outcome.ts';
import { runPsqlBaseline } from './lib/psql-baseline.ts';
import { type Check, checks, comparison, cpuTable, notes, table } from './lib/report.ts';

const OUT = path.resolve(import.meta.dirname, 'out');
const RSS_SMALL = 100_000;
const SCHEMA = {
  ours: 'bench_ours',
  oursSmall: 'bench_ours_100k',
  psql: 'bench_psql',
  dlt: 'bench_dlt',
};

const { values: flags } = parseArgs({
  options: {
    lines: { type: 'string', default: '1000000' },
    seed: { type: 'string', default: '1' },
    'thread-days': { type: 'string' },
    'skip-psql': { type: 'boolean', default: false },
    'skip-dlt': { type: 'boolean', default: false },
    'rss-check': { type: 'boolean' },
    keep: { type: 'boolean', default: false },
    'node-options': { type: 'string', default: '' },
    cli: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  console.log(
    'npm run bench:ingest -- [--lines N (1000000)] [--seed S (1)] [--thread-days D] [--skip-psql] [--skip-dlt]\n' +
      '                       [--rss-check (default when N >= 1000000)] [--keep (leave the bench schemas)]\n' +
      '                       [--node-options=STR (NODE_OPTIONS for our loader runs)]\n' +
      '                       [--cli DIR (measure the CLI of another checkout, e.g. a git worktree)]',
  );
  process.exit(0);
}
const lines = Number(flags.lines);
const seed = Number(flags.seed);
// Threads that live about this many days instead of all 30 (bench/lib/generate.ts): another file.
const threadDays = flags['thread-days'] === undefined ? undefined : Number(flags['thread-days']);
if (threadDays !== undefined && !(Number.isInteger(threadDays) && threadDays >= 1 && threadDays <= 30)) {
  console.error('--thread-days must be an integer from 1 to 30');
  process.exit(2);
}
if (!Number.isInteger(lines) || lines < 1 || !Number.isInteger(seed)) {
  console.error('--lines must be a positive integer and --seed an integer');
  process.exit(2);
}
const rssCheck = (flags['rss-check'] ?? lines >= 1_000_000) && lines !== RSS_SMALL;
// NODE_OPTIONS for our CLI's runs only, to try V8 settings (e.g. --max-old-space-size=64);
// --cli: the root of another checkout of crs-sync whose CLI to measure (an A/B of loader changes).
const nodeOptions = flags['node-options'];
const target: OursTarget = { root: flags.cli ? path.resolve(flags.cli) : THIS_CHECKOUT.root, nodeOptions };
const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const log = (s: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${s}`);

function exportLine(f: ExportFile): string {
  const how = f.generated ? `generated in ${(f.generateMs / 1000).toFixed(1)} s` : 'cached';
  return `${f.lines.toLocaleString('en-US')} lines, ${(f.bytes / 1e6).toFixed(1)} MB (${Math.round(f.bytes / f.lines)} B/line), ${how}: ${path.relative(process.cwd(), f.path)}`;
}

async function main(): Promise<number> {
  let server: string;
  try {
    server = await withDb(
      url,
      async (c) => (await c.query<{ server_version: string }>('show server_version')).rows[0]!.server_version,
    );
  } catch (err) {
    console.error(`cannot reach the database at ${describeUrl(url)}: ${(err as Error).message}`);
    return 1;
  }
  log(
    `database ${describeUrl(url)} (PostgreSQL ${server}); ${os.cpus().length} cores, node ${process.version}; ` +
      `peak RSS via ${hasGnuTime() ? '/usr/bin/time' : '/proc VmHWM polling'}` +
      (nodeOptions ? `; our runs with NODE_OPTIONS=${nodeOptions}` : '') +
      (flags.cli ? `; our CLI from ${target.root}` : ''),
  );
  const file = ensureExport(OUT, lines, seed, threadDays);
  log(`export: ${exportLine(file)}`);
  const small = rssCheck ? ensureExport(OUT, RSS_SMALL, seed, threadDays) : null;
  if (small) log(`export for the RSS check: ${exportLine(small)}`);

  const schemas = [SCHEMA.ours, SCHEMA.oursSmall, SCHEMA.psql, SCHEMA.dlt, `${SCHEMA.dlt}_staging`];
  await dropSchemas(url, schemas);

  const results: ContestResult[] = [];
  // Each contestant starts after a checkpoint (no dirty pages left by the one before), and notes
  // the machine's load average: other work on a shared 2-core machine skews every number.
  const contest = async (name: string, run: () => Promise<ContestResult>): Promise<ContestResult> => {
    await withDb(url, (c) => c.query('checkpoint')).catch(() => {});
    const load0 = os.loadavg()[0]!;
    log(`${name} ... (load average ${load0.toFixed(2)})`);
    const r = await run();
    results.push(r);
    if (isOutcome(r)) {
      r.notes.push(`load average (1 min) ${load0.toFixed(2)} before, ${os.loadavg()[0]!.toFixed(2)} after`);
      log(
        `${r.name}: ${r.rows.toLocaleString('en-US')} rows in ${r.seconds.toFixed(1)} s = ` +
          `${Math.round(rowsPerS(r)).toLocaleString('en-US')} rows/s, peak RSS ${r.peakRssMb?.toFixed(0) ?? '?'} MB`,
      );
    } else log(`${r.name}: skipped: ${r.reason}`);
    return r;
  };
  const ours = (
    name: string,
    f: ExportFile,
    schema: string,
    expect: 'inserted' | 'unchanged',
    migrate: boolean,
  ) =>
    contest(name, async () => {
      const why = migrate ? await migrateOurs(url, schema, target) : null;
      return why ? { name, reason: why } : importOurs(name, f.path, f.lines, url, schema, expect, target);
    });

  const firstRun = await ours('ours: first load', file, SCHEMA.ours, 'inserted', true);
  const first = isOutcome(firstRun) ? firstRun : null;
  if (first) await ours('ours: unchanged re-load', file, SCHEMA.ours, 'unchanged', false);
  if (!flags['skip-psql']) {
    await contest('psql \\copy + INSERT ON CONFLICT', () =>
      runPsqlBaseline(file.path, file.bytes, url, SCHEMA.psql, OUT),
    );
  }
  if (!flags['skip-dlt']) {
    await contest('dlt', () => runDltBaseline(file.path, file.bytes, url, SCHEMA.dlt, OUT, log));
  }
  // The 100k file three times, each into a fresh schema: a single run's peak RSS moved 142-153 MB
  // between runs here (and 300k lines measured 158-171 MB against 156-159 MB for 1M), so the
  // size comparison below is against the median of three.
  const smallRuns: ContestResult[] = [];
  for (let i = 1; small && i <= 3; i++) {
    await dropSchemas(url, [SCHEMA.oursSmall]);
    smallRuns.push(await ours(`ours: first load, 100k (${i}/3)`, small, SCHEMA.oursSmall, 'inserted', true));
  }
  const smallPeaks = smallRuns.flatMap((r) => (isOutcome(r) && r.peakRssMb !== null ? [r.peakRssMb] : []));
  const smallRss = smallPeaks.length === 3 ? [...smallPeaks].sort((a, b) => a - b)[1] : undefined;

  const main = results.filter((r) => !smallRuns.includes(r));
  console.log(`\n== Ingest benchmark: ${exportLine(file)}\n`);
  console.log(comparison(main, first));
  console.log('\nCPU (2 cores = 200%; postgres = all server processes, incl. other sessions on it):\n');
  console.log(cpuTable(results));
  const n = notes(results);
  if (n) console.log(`\n${n}`);

  const find = (name: string) => results.find((r) => r.name.startsWith(name));
  const reload = find('ours: unchanged re-load');
  const psql = find('psql');
  const dlt = find('dlt');
  const ratio = (a: ContestResult | undefined, b: ContestResult | undefined) =>
    a && b && isOutcome(a) && isOutcome(b) ? rowsPerS(a) / rowsPerS(b) : null;
  const x = (v: number | null) => (v === null ? '-' : `${v.toFixed(2)}x`);
  // The goals in force (bench/README.md "Targets"). Issue 13's "first load >= 2x the psql
  // baseline" (not reachable on 2 cores) and "Node CPU <= 25 s per 1M rows" are retired: both
  // are still measured, and printed as figures with no target.
  const list: Check[] = [];
  const r1 = ratio(first ?? undefined, psql);
  const figures: string[][] = [['first load vs psql COPY + merge (rows/s)', x(r1)]];
  if (first && first.cpuS !== null) {
    figures.push([
      'Node CPU per 1M rows, ours: first load',
      `${((first.cpuS * 1e6) / first.rows).toFixed(1)} s`,
    ]);
  }
  const r2 = ratio(reload, first ?? undefined);
  list.push({
    what: 'unchanged re-load vs first load (rows/s)',
    value: x(r2),
    target: '>= 3.00x',
    ok: r2 === null ? null : r2 >= 3,
  });
  for (const r of [first, reload, ...smallRuns]) {
    if (r && isOutcome(r) && r.peakRssMb !== null) {
      list.push({
        what: `peak RSS, ${r.name}`,
        value: `${r.peakRssMb.toFixed(0)} MB`,
        target: '<= 200 MB',
        ok: r.peakRssMb <= 200,
      });
    }
  }
  if (smallRss !== undefined && first && first.peakRssMb !== null) {
    const d = (first.peakRssMb - smallRss) / smallRss;
    list.push({
      what: `peak RSS ${lines.toLocaleString('en-US')} vs 100k lines (median of 3)`,
      value: `${first.peakRssMb.toFixed(0)} vs ${smallRss.toFixed(0)} MB (${d >= 0 ? '+' : ''}${(100 * d).toFixed(1)}%)`,
      target: 'within 10%',
      ok: Math.abs(d) <= 0.1,
    });
  }
  const r3 = ratio(first ?? undefined, dlt);
  list.push({
    what: 'first load vs dlt merge (rows/s)',
    value: x(r3),
    target: '> 1x (report)',
    ok: r3 === null ? null : r3 > 1,
  });
  console.log(`\nTargets:\n\n${checks(list)}`);
  console.log(`\nFigures (no target):\n\n${table(['figure', 'measured'], figures)}`);

  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const saved = path.join(OUT, `ingest-${lines}-${stamp}.json`);
  writeFileSync(
    saved,
    `${JSON.stringify({ lines, seed, bytes: file.bytes, server, results, checks: list, figures }, null, 2)}\n`,
  );
  console.log(`\nresults saved to ${path.relative(process.cwd(), saved)}`);

  if (flags.keep) console.log(`schemas kept: ${schemas.join(', ')}`);
  else await dropSchemas(url, schemas);
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(err);
    process.exitCode = 1;
  },
);
