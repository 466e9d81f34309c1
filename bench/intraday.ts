/**
 * bench:intraday: what intraday pulls of the open day cost against the daily pull, and the data's
 * delay they give (issue 23).
 *
 *   npm run bench:intraday -- [--rows 100000[,1000000]] [--intervals 15m,1h] [--seed 23]
 *                             [--tenant-rows 10000000] [--daily-runs 3] [--known-lines on|off|both]
 *                             [--database-url URL] [--keep]
 *
 * Per rows-per-day value, one simulated UTC day in scenarios, each in a fresh schema: the daily
 * pull alone (one complete pull at 00:30 the next day) and, per interval, the open day pulled at
 * every tick of the day as partial, then the same complete pull at 00:30. See bench/README.md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parseDuration } from '../src/config.ts';
import { type IntradayRun, report } from './lib/intraday/report.ts';
import { type ExtraMeasures, runScenario, type ScenarioResult } from './lib/intraday/scenario.ts';
import { openBenchServer } from './lib/intraday/server.ts';
import { startClockedSimulator } from './lib/intraday/sim.ts';

const OUT = path.resolve(import.meta.dirname, 'out');
const DAY = '2026-11-25';
const DAY_MS = 86_400_000;
const DAY_START = Date.parse(`${DAY}T00:00:00Z`);
// The daily schedule's time, and the intraday schedule's closed-day pull (workflows/sync-intraday.ts).
const CLOSED_PULL = DAY_START + DAY_MS + 30 * 60_000;

const { values: flags } = parseArgs({
  options: {
    rows: { type: 'string', default: '100000' },
    intervals: { type: 'string', default: '15m,1h' },
    seed: { type: 'string', default: '23' },
    'tenant-rows': { type: 'string', default: '10000000' },
    'daily-runs': { type: 'string', default: '3' },
    'known-lines': { type: 'string', default: 'on' },
    'database-url': { type: 'string' },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  console.log(
    'npm run bench:intraday -- [--rows N[,N...] (100000; e.g. 100000,1000000)] [--intervals 15m,1h]\n' +
      '                          [--seed S (23)] [--tenant-rows N (10000000: the extrapolation)]\n' +
      '                          [--daily-runs N (3): the daily pull alone, N times; the run of median CPU is the baseline]\n' +
      '                          [--known-lines on|off|both (on): partial pulls skip the lines the warehouse holds\n' +
      '                           (decision 0017); both: each interval also without, named "..., every line merged"]\n' +
      '                          [--database-url URL (default: a PostgreSQL cluster of its own)] [--keep]\n' +
      'One simulated UTC day per scenario: the daily pull alone, and the open day pulled every interval\n' +
      'as partial, then the closed day complete. 100k rows/day, 15m and 1h: ~10 min here; 1M rows/day, 1h\n' +
      'alone: ~18 min (15m at 1M: about an hour).',
  );
  process.exit(0);
}
const rowsList = flags.rows.split(',').map(Number);
const intervals = flags.intervals.split(',').map((s) => ({ label: s.trim(), ms: parseDuration(s.trim()) }));
const seed = Number(flags.seed);
const tenantRows = Number(flags['tenant-rows']);
const dailyRuns = Number(flags['daily-runs']);
const knownModes = { on: [true], off: [false], both: [false, true] }[flags['known-lines'] as string];
if (!knownModes) {
  console.error('--known-lines takes on, off or both');
  process.exit(2);
}
if (
  rowsList.some((n) => !Number.isInteger(n) || n < 100) ||
  !Number.isInteger(seed) ||
  !(tenantRows > 0) ||
  !(Number.isInteger(dailyRuns) && dailyRuns >= 1)
) {
  console.error(
    '--rows takes integers of at least 100 (comma-separated), --seed an integer, --daily-runs one from 1',
  );
  process.exit(2);
}
for (const i of intervals) {
  if (!i.ms || i.ms < 60_000 || DAY_MS % i.ms !== 0) {
    console.error(`--intervals: ${i.label} is not a duration from 1m that divides a day (15m, 1h, ...)`);
    process.exit(2);
  }
}
const log = (s: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${s}`);
const load = () => os.loadavg()[0]!.toFixed(2);

async function main(): Promise<number> {
  const server = await openBenchServer(flags['database-url']);
  const runs: IntradayRun[] = [];
  try {
    log(`server: ${server.describe}; ${os.cpus().length} cores, node ${process.version}; seed ${seed}`);
    for (const rows of rowsList) runs.push(await measureRows(rows, server));
  } finally {
    await server.close();
  }
  const text = report(runs, {
    seed,
    tenantRows,
    server: server.describe,
    command: `npm run bench:intraday -- ${process.argv.slice(2).join(' ')}`.trim(),
  });
  console.log(text.output);
  mkdirSync(OUT, { recursive: true });
  const saved = path.join(OUT, `intraday-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    saved,
    `${JSON.stringify({ seed, day: DAY, runs: runs.map(strip), checks: text.checks }, null, 2)}\n`,
  );
  console.log(`\nresults saved to ${path.relative(process.cwd(), saved)}`);
  return 0;
}

async function measureRows(rows: number, server: Awaited<ReturnType<typeof openBenchServer>>) {
  const sim = await startClockedSimulator({ seed, days: 4, recordsPerDay: rows, clock: DAY_START });
  const loadBefore = load();
  const scenarios: ScenarioResult[] = [];
  let dailyCpu: number[] = [];
  let extras: ExtraMeasures | null = null;
  try {
    // A first scenario runs on cold code (V8 compiles the loader as it goes) and a cold server:
    // a daily pull of its own, not reported, warms both so the baseline is not the one that pays.
    log(`${rows.toLocaleString('en-US')} rows/day: warm-up (a daily pull, not reported)`);
    await runScenario({
      name: `warmup_${rows}`,
      day: DAY,
      ticks: [],
      closedAt: CLOSED_PULL,
      server,
      sim,
      keep: false,
      log,
    });
    // The daily pull alone, several times: it is the ratios' denominator, and one run of it moved
    // 11.0-16.0 s of CPU between runs of the same code (decision 0014). The run of median CPU is
    // the baseline; every run's CPU is printed.
    const dailies: Array<Awaited<ReturnType<typeof runScenario>>> = [];
    for (let k = 0; k < dailyRuns; k++) {
      log(
        `${rows.toLocaleString('en-US')} rows/day: daily pull ${k + 1}/${dailyRuns} (load average ${load()})`,
      );
      dailies.push(
        await runScenario({
          name: `daily_${rows}_${k + 1}`,
          day: DAY,
          ticks: [],
          closedAt: CLOSED_PULL,
          server,
          sim,
          keep: flags.keep && k === dailyRuns - 1,
          extras: k === 0,
          log,
        }),
      );
    }
    extras = dailies[0]!.extras;
    const cpuOf = (r: ScenarioResult) => r.pulls.reduce((s, p) => s + p.nodeCpuS + p.serverCpuS, 0);
    const byCpu = [...dailies].sort((a, b) => cpuOf(a.result) - cpuOf(b.result));
    const daily = byCpu[Math.floor((byCpu.length - 1) / 2)]!;
    dailyCpu = dailies.map((d) => cpuOf(d.result));
    log(
      `daily pull CPU over ${dailyRuns} run(s): ${dailyCpu.map((x) => `${x.toFixed(1)} s`).join(', ')}; the baseline: ${cpuOf(daily.result).toFixed(1)} s`,
    );
    scenarios.push(daily.result);
    for (const i of intervals) {
      const ticks: number[] = [];
      for (let t = DAY_START; t < DAY_START + DAY_MS; t += i.ms!) ticks.push(t);
      for (const knownLines of knownModes!) {
        // The targets are checked against the scenario named `every <interval>` (report.ts).
        const name = knownLines ? `every ${i.label}` : `every ${i.label}, every line merged`;
        log(`${rows.toLocaleString('en-US')} rows/day: ${name} (load average ${load()})`);
        const r = await runScenario({
          name: `every_${i.label}_${rows}${knownLines ? '' : '_merged'}`,
          day: DAY,
          ticks,
          closedAt: CLOSED_PULL,
          server,
          sim,
          keep: flags.keep,
          knownLines,
          log,
        });
        scenarios.push({ ...r.result, name });
      }
    }
  } finally {
    await sim.close();
  }
  scenarios[0]!.name = 'daily pull only';
  return {
    rows,
    intervals: intervals.map((i) => ({ label: i.label, ms: i.ms! })),
    scenarios,
    dailyCpuS: dailyCpu,
    extras: extras!,
    load: { before: loadBefore, after: load() },
  } satisfies IntradayRun;
}

/** The saved JSON without the per-message delays (percentiles are in the output). */
function strip(r: IntradayRun) {
  return {
    ...r,
    scenarios: r.scenarios.map(({ delaysMs, firstSeen, ...s }) => ({ ...s, messages: delaysMs.length })),
  };
}

process.exitCode = await main();
