/**
 * Backfill benchmark: the same days loaded and enriched two ways, against the simulator at a fixed
 * response latency, under the same tenant request budget, into a real Postgres:
 *   bare      one export request for the range, `crs-sync import FILE --from --to`, then the
 *             enrichment (bench/lib/backfill/enrich-all.ts: the enrichPending shape, no Temporal)
 *   temporal  `crs-sync worker` × 1, 2, 3 on one task queue and the backfill workflow
 * Every request to the service passes a counting front door (the service's view, all processes
 * together). It prints wall time, days/min, the orchestration overhead per day, the budget's
 * utilisation while threads were queued and the most requests in any second, the workflow history
 * sizes, and an extrapolation (linear in days; stated as such) to a three-year backfill.
 *
 *   npm run bench:backfill -- [--days 30] [--records 1000] [--rps 50] [--latency 25]
 *                             [--workers 1,2,3] [--seed 7]
 *
 * Not a test. Throw-away schemas in a database of its own, crs_bench_backfill, created on the
 * server of DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) when missing: apart
 * from the tests' many schemas, whose coming and going races the migrator's catalog reads. The
 * Temporal dev server is the project's pinned CLI, started and stopped here.
 */
import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Runtime } from '@temporalio/worker';
import pg from 'pg';
import { shiftDay } from '../src/common/civil-date.ts';
import { type Simulator, startSimulator } from '../src/simulator/index.ts';
import { ensureTemporalCli } from '../src/temporal/cli-binary.ts';
import { openWarehouse, type Warehouse } from '../src/warehouse/db.ts';
import { dropSchema, migrateToLatest } from '../src/warehouse/migrator.ts';
import { backfill } from '../workflows/index.ts';
import { type HistoryTally, tallyHistories } from './lib/backfill/histories.ts';
import { type RequestCounter, rateFigures, startRequestCounter } from './lib/backfill/request-counter.ts';
import { startPollingWorker, type WorkerProcess } from './lib/backfill/workers.ts';
import { compareWithTruth } from './lib/chaos/compare.ts';
import { table } from './lib/report.ts';

const { values: flags } = parseArgs({
  options: {
    days: { type: 'string', default: '30' },
    records: { type: 'string', default: '1000' },
    rps: { type: 'string', default: '50' },
    latency: { type: 'string', default: '25' },
    workers: { type: 'string', default: '1,2,3' },
    seed: { type: 'string', default: '7' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  console.log(
    'npm run bench:backfill -- [--days 30] [--records 1000 (per day)] [--rps 50 (the tenant budget)]\n' +
      '                          [--latency 25 (ms per response)] [--workers 1,2,3] [--seed 7]',
  );
  process.exit(0);
}
const DAYS = Number(flags.days);
const RECORDS = Number(flags.records);
const RPS = Number(flags.rps);
const LATENCY = Number(flags.latency);
const WORKER_COUNTS = flags.workers.split(',').map(Number);
const SEED = Number(flags.seed);
const THREE_YEARS = 1096;
/** Longest a Temporal pass may take before the bench gives up on it. */
const PASS_TIMEOUT_MIN = 20;
/** Days loaded at once by the backfill: two per worker (the worker's default) for three workers. */
const CONCURRENCY = 6;
const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const BENCH_DB = 'crs_bench_backfill';
const url = Object.assign(new URL(serverUrl), { pathname: `/${BENCH_DB}` }).toString();
const root = path.resolve(import.meta.dirname, '..');
const run = promisify(execFile);
const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

interface Pass {
  name: string;
  workers: number;
  seconds: number;
  threads: number;
  requests: number;
  maxPerSecond: number;
  maxSliding: number;
  /** Requests ÷ (budget × seconds) between the first and the last thread API request. */
  utilisation: number;
  differences: number;
  histories?: HistoryTally;
}

async function freshWarehouse(schema: string): Promise<Warehouse> {
  const w = openWarehouse({ url, schema, max: 4 });
  await dropSchema(w);
  await migrateToLatest(w);
  return w;
}

/** The environment a worker (or the bare path's processes) gets: service via the front door, budget, schema. */
function serviceEnv(sim: Simulator, counter: RequestCounter, schema: string): Record<string, string> {
  return {
    ...counter.env(sim.env(), sim.baseUrl),
    DATABASE_URL: url,
    CRS_SCHEMA: schema,
    CRS_RATE_LIMIT_RPS: String(RPS),
    LOG_LEVEL: 'warn',
  };
}

/** Request figures of the part of the counter's log from `start` on. */
function requestFigures(counter: RequestCounter, start: number) {
  const mine = counter.requests().slice(start);
  const rates = rateFigures(mine.map((r) => r.at));
  const threadCalls = mine.filter((r) => !r.path.includes('/analytics/') && !r.path.includes('token'));
  const first = threadCalls[0]?.at ?? 0;
  const last = threadCalls.at(-1)?.at ?? 0;
  const inWindow = mine.filter((r) => r.at >= first && r.at <= last).length;
  const seconds = Math.max(1, (last - first) / 1000);
  return { ...rates, utilisation: inWindow / (RPS * seconds) };
}

async function differences(w: Warehouse, sim: Simulator, days: string[]): Promise<number> {
  const cmp = await compareWithTruth(w, sim, days);
  return Object.values(cmp.differences).flat().length;
}

async function barePass(sim: Simulator, counter: RequestCounter, days: string[]): Promise<Pass> {
  const schema = 'bench_backfill_bare';
  const w = await freshWarehouse(schema);
  const env = { ...process.env, ...serviceEnv(sim, counter, schema) };
  const dir = path.join(root, 'bench', 'out');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'backfill-export.jsonl');
  const from = days[0] ?? '';
  const to = days.at(-1) ?? '';
  const start = counter.requests().length;
  const t0 = performance.now();
  // One export request for the whole range, as an operator would fetch a file to import.
  const res = await fetch(`${counter.baseUrl}/v2/analytics/messages?start_date=${from}&end_date=${to}`, {
    headers: { authorization: `Bearer ${sim.credentials.serviceAccountToken}` },
  });
  if (!res.ok) throw new Error(`export: HTTP ${res.status}`);
  await writeFile(file, Buffer.from(await res.arrayBuffer()));
  const cli = path.join(root, 'bin', 'crs-sync.js');
  await run(process.execPath, [cli, 'import', file, '--from', from, '--to', to, '--no-progress'], {
    env,
    cwd: root,
  });
  const enrich = path.join(root, 'bench', 'lib', 'backfill', 'enrich-all.ts');
  const { stdout } = await run(process.execPath, [enrich], { env, cwd: root, maxBuffer: 1 << 20 });
  const seconds = (performance.now() - t0) / 1000;
  const counts = JSON.parse(stdout) as { threads: number };
  const f = requestFigures(counter, start);
  const pass: Pass = {
    name: 'import + enrichment',
    workers: 1,
    seconds,
    threads: counts.threads,
    requests: f.requests,
    maxPerSecond: f.maxPerSecond,
    maxSliding: f.maxSliding,
    utilisation: f.utilisation,
    differences: await differences(w, sim, days),
  };
  await w.close();
  return pass;
}

async function temporalPass(
  env: TestWorkflowEnvironment,
  sim: Simulator,
  counter: RequestCounter,
  days: string[],
  n: number,
): Promise<Pass> {
  const schema = `bench_backfill_t${n}`;
  const w = await freshWarehouse(schema);
  const taskQueue = `bench-backfill-${n}-${Date.now()}`;
  const workers: WorkerProcess[] = [];
  try {
    // One after another, so timing starts with all of them polling.
    for (let i = 1; i <= n; i++) {
      workers.push(
        await startPollingWorker(env.client, { namespace: 'default', taskQueue }, `w${i}`, {
          ...serviceEnv(sim, counter, schema),
          TEMPORAL_ADDRESS: env.address,
          TEMPORAL_NAMESPACE: 'default',
          TEMPORAL_TASK_QUEUE: taskQueue,
        }),
      );
    }
    const start = counter.requests().length;
    const t0 = performance.now();
    const handle = await env.client.workflow.start(backfill, {
      taskQueue,
      workflowId: `bench-backfill-${n}`,
      args: [{ from: days[0] ?? '', to: days.at(-1) ?? '', concurrency: CONCURRENCY, enrich: true }],
    });
    // A pass that hangs (a worker stuck on something) ends the bench with the workers' last words.
    let timer: NodeJS.Timeout | undefined;
    const result = await Promise.race([
      handle.result(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`pass with ${n} workers: no result in ${PASS_TIMEOUT_MIN} min`)),
          PASS_TIMEOUT_MIN * 60_000,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    const seconds = (performance.now() - t0) / 1000;
    const f = requestFigures(counter, start);
    const histories = await tallyHistories(env.client, `TaskQueue = '${taskQueue}'`);
    return {
      name: `Temporal, ${n} worker${n > 1 ? 's' : ''}`,
      workers: n,
      seconds,
      threads: result.enrich?.threads ?? 0,
      requests: f.requests,
      maxPerSecond: f.maxPerSecond,
      maxSliding: f.maxSliding,
      utilisation: f.utilisation,
      differences: await differences(w, sim, days),
      histories,
    };
  } catch (err) {
    for (const x of workers) process.stderr.write(`${x.name}: ${x.tail()}\n`);
    throw err;
  } finally {
    for (const x of workers) await x.stop();
    await w.close();
  }
}

/** Events and bytes of the histories a pass left, by workflow type. */
function historyRows(p: Pass): string[][] {
  const byType = new Map<string, { runs: number; events: number; bytes: number; maxEvents: number }>();
  for (const s of p.histories?.sizes ?? []) {
    const t = byType.get(s.type) ?? { runs: 0, events: 0, bytes: 0, maxEvents: 0 };
    t.runs += 1;
    t.events += s.events;
    t.bytes += s.bytes;
    t.maxEvents = Math.max(t.maxEvents, s.events);
    byType.set(s.type, t);
  }
  return [...byType].map(([type, t]) => [
    p.name,
    type,
    String(t.runs),
    String(t.events),
    String(t.maxEvents),
    `${(t.bytes / 1024).toFixed(0)} KiB`,
  ]);
}

function fmt(n: number, digits = 1): string {
  return n.toFixed(digits);
}

function report(passes: Pass[], days: number, rows: number, load: string): string {
  const bare = passes[0];
  if (!bare) return '';
  const out: string[] = [];
  out.push(
    `${days} days × ~${RECORDS} records/day (${rows} rows), ${bare.threads} threads; budget ${RPS} requests/s; ` +
      `simulator latency ${LATENCY} ms; load average at start ${load}`,
  );
  out.push(
    table(
      [
        'path',
        'seconds',
        'days/min',
        'vs bare',
        'overhead/day',
        'requests',
        'max/s',
        'max any 1000 ms',
        'budget used',
        'diffs',
      ],
      passes.map((p) => [
        p.name,
        fmt(p.seconds),
        fmt((days / p.seconds) * 60),
        `${fmt(p.seconds / bare.seconds, 2)}x`,
        p === bare ? '' : `${fmt(((p.seconds - bare.seconds) / days) * 1000, 0)} ms`,
        String(p.requests),
        String(p.maxPerSecond),
        String(p.maxSliding),
        `${fmt(p.utilisation * 100, 0)}%`,
        String(p.differences),
      ]),
    ),
  );
  out.push(
    table(
      ['pass', 'workflow', 'runs', 'events', 'most in a run', 'bytes'],
      passes.flatMap((p) => historyRows(p)),
    ),
  );
  const perDay = (p: Pass) => p.seconds / days;
  const floor = (bare.requests / days) * THREE_YEARS;
  out.push(
    `Extrapolation (linear in days, not measured) to a three-year backfill of ${THREE_YEARS} days at this volume:`,
    ...passes.map((p) => `  ${p.name}: ${fmt((perDay(p) * THREE_YEARS) / 3600, 2)} h`),
    `  the budget alone: ${Math.round(floor)} requests at ${RPS}/s = ${fmt(floor / RPS / 3600, 2)} h`,
  );
  for (const p of passes.filter((x) => x.histories)) {
    const backfillEvents = (p.histories?.sizes ?? []).filter((s) => s.type === 'backfill');
    const events = backfillEvents.reduce((a, s) => a + s.events, 0);
    out.push(
      `  ${p.name}: backfill history ${fmt(events / days, 1)} events/day → ${Math.ceil(THREE_YEARS / 100)} runs of ≤ 100 days, ~${fmt((events / days) * 100, 0)} events each`,
    );
  }
  return out.join('\n');
}

async function ensureBenchDatabase(): Promise<void> {
  const c = new pg.Client({ connectionString: serverUrl });
  await c.connect();
  try {
    const r = await c.query('select 1 from pg_database where datname = $1', [BENCH_DB]);
    if (r.rowCount === 0) await c.query(`create database ${BENCH_DB}`);
  } finally {
    await c.end();
  }
}

Runtime.install({ logger: quiet });
await ensureBenchDatabase();
const load = os
  .loadavg()
  .map((x) => x.toFixed(2))
  .join(' ');
const cli = await ensureTemporalCli();
if (!cli) throw new Error('no Temporal CLI (npm run setup:temporal)');
const env = await TestWorkflowEnvironment.createLocal({
  server: { executable: { type: 'existing-path', path: cli }, ip: '127.0.0.1' },
});
const frozen = new Date();
const sim = await startSimulator({
  seed: SEED,
  days: DAYS + 1,
  recordsPerDay: RECORDS,
  faults: `latency=${LATENCY}ms`,
  now: () => frozen,
});
const counter = await startRequestCounter(sim.baseUrl);
const today = frozen.toISOString().slice(0, 10);
const days = Array.from({ length: DAYS }, (_, i) => shiftDay(today, i - DAYS));
const rows = days.reduce((a, d) => a + sim.truth.exportDayLines(d).length, 0);
try {
  const passes: Pass[] = [];
  process.stderr.write('bare: export file, crs-sync import, enrichment …\n');
  // Each pass's figures as soon as it ends (a later pass that fails leaves the earlier ones).
  const done = (p: Pass) => {
    passes.push(p);
    const { histories: _, ...figures } = p;
    process.stderr.write(`  ${JSON.stringify(figures)}\n`);
  };
  done(await barePass(sim, counter, days));
  for (const n of WORKER_COUNTS) {
    process.stderr.write(`Temporal with ${n} worker(s) …\n`);
    done(await temporalPass(env, sim, counter, days, n));
  }
  console.log(report(passes, DAYS, rows, load));
  console.log(
    `load average at the end ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
} finally {
  await counter.close();
  await sim.close();
  await env.teardown();
}
