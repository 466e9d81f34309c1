/**
 * Enrichment benchmark: the real enrichment (src/enrich) through the real client (src/api) against
 * the simulator at fixed response latencies, into a real Postgres.
 *
 *   npm run bench:enrich -- [--latencies 10,25,50] [--concurrency 8] [--rps 1000] [--limited-rps 50 (0: skip)]
 *                           [--faults 429=0.05:1s,5xx=0.05:2 (none: skip)] [--records 300] [--days 3]
 *                           [--page-size 50]
 *
 * For each latency L it reports threads/s and requests/s, against the bound
 * min(concurrency ÷ L, rate limit) (a client with C requests in flight, each taking L, cannot do
 * better), and the highest number of requests started in any one-second window (sliding, from
 * the start times of every request the client made) against the configured limit. One more row per
 * latency runs with a rate limit below concurrency ÷ L, where the limiter is what binds, and a last
 * one at the first latency and that limit with the simulator answering 429 and 5xx now and then,
 * so that retries take their grants from the same budget. For
 * reference, each unlimited row also shows what bare undici requests, `concurrency` in flight, reach
 * against the same simulator (the simulator's own time per response and the machine's load count
 * against every client alike). Target: ≥ 80% of the bound; the limit never exceeded. DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/test) is used with throw-away schemas.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { request } from 'undici';
import { createServiceClient, type HttpRequest } from '../src/api/index.ts';
import { createEnrichOps } from '../src/enrich/index.ts';
import { isCrsError } from '../src/errors.ts';
import { createLogger } from '../src/log.ts';
import type { SimulatorCredentials } from '../src/simulator/index.ts';
import { openWarehouse } from '../src/warehouse/db.ts';
import { dropSchema, migrateToLatest } from '../src/warehouse/migrator.ts';
import { describeUrl } from './lib/db.ts';

const { values: flags } = parseArgs({
  options: {
    latencies: { type: 'string', default: '10,25,50' },
    concurrency: { type: 'string', default: '8' },
    rps: { type: 'string', default: '1000' },
    'limited-rps': { type: 'string', default: '50' },
    faults: { type: 'string', default: '429=0.05:1s,5xx=0.05:2' },
    records: { type: 'string', default: '300' },
    days: { type: 'string', default: '3' },
    'page-size': { type: 'string', default: '50' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  console.log(
    'npm run bench:enrich -- [--latencies 10,25,50] [--concurrency 8] [--rps 1000] [--limited-rps 50]\n' +
      '                       [--faults 429=0.05:1s,5xx=0.05:2 (a limited row at the first latency; none: skip)]\n' +
      '                       [--records 300 (per simulated day)] [--days 3] [--page-size 50]',
  );
  process.exit(0);
}
const latencies = flags.latencies.split(',').map(Number);
const concurrency = Number(flags.concurrency);
const rps = Number(flags.rps);
const limitedRps = Number(flags['limited-rps']);
const records = Number(flags.records);
const days = Number(flags.days);
const pageSize = Number(flags['page-size']);
const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const log = createLogger({ level: 'warn', pretty: false });

interface Row {
  latencyMs: number;
  /** Simulator faults besides the latency ('' for none). */
  faults: string;
  concurrency: number;
  rateLimit: number;
  threads: number;
  requests: number;
  retries: number;
  seconds: number;
  threadsPerS: number;
  requestsPerS: number;
  boundPerS: number;
  ofBound: number;
  maxInAnySecond: number;
  limitHeld: boolean;
  meanInFlight: number;
  /** Event-loop utilisation of the client's thread (client, enrichment, pg driver) and the simulator's. */
  mainBusy: number;
  simBusy: number;
  /** CPU time (user + system) of the client's process per request, ms. */
  cpuMsPerRequest: number;
  /** How late the client's event loop ran what was ready (p50 and p99, ms): a response waits that long. */
  loopDelayP50Ms: number;
  loopDelayP99Ms: number;
  p50LatencyMs: number;
  p95LatencyMs: number;
  /** Requests/s of bare undici requests, `concurrency` in flight, against the same simulator (no limit rows). */
  ceilingPerS: number | null;
}

function maxInAnyWindow(times: number[], windowMs: number): number {
  const t = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < t.length; i++) {
    while (t[i]! - t[j]! >= windowMs) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

interface SimCounters {
  idle: number;
  active: number;
}

interface RemoteSim {
  baseUrl: string;
  legacyBaseUrl: string;
  tokenUrl: string;
  credentials: SimulatorCredentials;
  threadIds: string[];
  /** The simulator process's event-loop counters (for its utilisation between two readings). */
  elu(): Promise<SimCounters>;
  close(): Promise<void>;
}

/** Event-loop utilisation between two readings of the simulator's counters. */
function utilisation(a: SimCounters, b: SimCounters): number {
  const active = b.active - a.active;
  const total = active + (b.idle - a.idle);
  return total > 0 ? active / total : 0;
}

/**
 * The simulator in a child process: it stands in for a remote service, so it must not take the
 * client's CPU time or event loop (a worker thread would still share the process).
 */
async function startRemoteSimulator(faults: string): Promise<RemoteSim> {
  const child = fork(
    fileURLToPath(new URL('./lib/sim-process.ts', import.meta.url)),
    [JSON.stringify({ seed: 3, days, recordsPerDay: records, faults })],
    { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
  );
  const next = (type: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const onMessage = (m: Record<string, unknown>) => {
        if (m.type !== type) return;
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(m);
      };
      const onExit = (code: number | null) => reject(new Error(`simulator process exited (${code})`));
      child.on('message', onMessage);
      child.once('exit', onExit);
    });
  const { type: _, ...info } = await next('ready');
  return {
    ...(info as Omit<RemoteSim, 'elu' | 'close'>),
    elu: async () => {
      const r = next('elu');
      child.send('elu');
      return (await r) as unknown as SimCounters;
    },
    close: async () => {
      const exited = once(child, 'exit');
      child.send('close');
      await exited;
    },
  };
}

/**
 * What any client could do here: `concurrency` loops of bare undici requests, each reading a thread's
 * first history page and then the artifacts it names, as the enrichment does but with no client,
 * parsing or warehouse, against the same simulator for `seconds`. It runs after the enrichment,
 * so it does not warm the simulator up for it.
 */
async function bareCeiling(sim: RemoteSim, seconds: number): Promise<number> {
  const headers = { authorization: `Bearer ${sim.credentials.accessToken}`, accept: 'application/json' };
  const get = async (url: string) =>
    (await request(url, { headers })).body.json() as Promise<Record<string, unknown>>;
  let requests = 0;
  let next = 0;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const id = sim.threadIds[next++ % sim.threadIds.length]!;
        const page = await get(
          `${sim.baseUrl}/v2/threads/${id}/messages?start_index=0&limit_num=${pageSize}`,
        );
        requests++;
        const entries = Array.isArray(page.messages)
          ? (page.messages as Array<{ artifact_ids?: string[] }>)
          : [];
        for (const aid of entries.flatMap((e) => e.artifact_ids ?? [])) {
          if (performance.now() >= end) break;
          await get(`${sim.baseUrl}/v2/threads/${id}/artifacts/${encodeURIComponent(aid)}`);
          requests++;
        }
      }
    }),
  );
  return requests / ((performance.now() - t0) / 1000);
}

/**
 * One batch as the enrichment activity runs it: a batch that ends with threads still pending
 * throws a retryable error, and Temporal runs it again (only the unfinished threads do work).
 */
async function enrichBatch(ops: ReturnType<typeof createEnrichOps>, threadIds: string[]) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await ops.enrichThreads({ threadIds, loadId: 'bench' });
    } catch (err) {
      if (!isCrsError(err) || !err.retryable || attempt >= 5) throw err;
    }
  }
}

async function run(latencyMs: number, rateLimit: number, faults = ''): Promise<Row> {
  const sim = await startRemoteSimulator([`latency=${latencyMs}ms`, faults].filter(Boolean).join(','));
  const schema = `bench_enrich_${latencyMs}_${rateLimit}`.replace(/\./g, '_');
  const w = openWarehouse({ url, schema, max: 20 });
  try {
    await dropSchema(w);
    await migrateToLatest(w);
    const ids = sim.threadIds;
    await sql`insert into threads (thread_id, enrich_status, enrich_requested_at)
              select unnest(${ids}::uuid[]), 'pending', now()`.execute(w.db);
    const starts: number[] = [];
    // Time-weighted requests in flight (call → response headers) and their latencies, to tell
    // a client that is starved of work from a service (or machine) that answers slowly.
    let inFlight = 0;
    let lastChange = performance.now();
    let busyArea = 0;
    const latencies: number[] = [];
    const change = (d: number) => {
      const t = performance.now();
      busyArea += inFlight * (t - lastChange);
      lastChange = t;
      inFlight += d;
    };
    const recordingRequest: HttpRequest = async (input, init) => {
      const t = performance.now();
      starts.push(t);
      change(1);
      try {
        return await request(input, init);
      } finally {
        change(-1);
        latencies.push(performance.now() - t);
      }
    };
    const api = createServiceClient(
      {
        baseUrl: sim.baseUrl,
        legacyBaseUrl: sim.legacyBaseUrl,
        serviceAccountToken: sim.credentials.serviceAccountToken,
        accessToken: undefined,
        tokenUrl: sim.tokenUrl,
        clientId: sim.credentials.clientId,
        clientSecret: sim.credentials.clientSecret,
        apiKey: sim.credentials.apiKey,
        timeoutMs: 30_000,
        rateLimitRps: rateLimit,
        concurrency,
        request: recordingRequest,
      },
      log,
    );
    // Shaped like the enrichPending workflow on one worker: pages of batchSize × concurrency
    // pending ids, batches of 25 threads, `concurrency` batches at once, each enriching
    // `concurrency` threads at once (all sharing the one client and its limits).
    const ops = createEnrichOps({ db: w.db, pool: w.pool, api, log, concurrency, pageSize });
    const batchSize = 25;
    const t0 = performance.now();
    const mainElu0 = performance.eventLoopUtilization();
    const cpu0 = process.cpuUsage();
    const loopDelay = monitorEventLoopDelay({ resolution: 1 });
    loopDelay.enable();
    const simElu0 = await sim.elu();
    let after: string | null = null;
    let threads = 0;
    for (;;) {
      const page = await ops.listPendingThreads({ afterThreadId: after, limit: batchSize * concurrency });
      if (page.length === 0) break;
      const batches: string[][] = [];
      for (let i = 0; i < page.length; i += batchSize) batches.push(page.slice(i, i + batchSize));
      const counts = await Promise.all(batches.map((b) => enrichBatch(ops, b)));
      threads += counts.reduce((s, c) => s + c.threads, 0);
      after = page[page.length - 1]!;
    }
    const seconds = (performance.now() - t0) / 1000;
    const mainBusy = performance.eventLoopUtilization(mainElu0).utilization;
    const cpu = process.cpuUsage(cpu0);
    loopDelay.disable();
    const simBusy = utilisation(simElu0, await sim.elu());
    change(0);
    latencies.sort((a, b) => a - b);
    const requests = starts.length;
    const boundPerS = Math.min(concurrency / (latencyMs / 1000), rateLimit);
    const maxInAnySecond = maxInAnyWindow(starts, 1000);
    return {
      latencyMs,
      faults,
      concurrency,
      rateLimit,
      threads,
      requests,
      retries: api.stats().retries,
      seconds,
      threadsPerS: threads / seconds,
      requestsPerS: requests / seconds,
      boundPerS,
      ofBound: requests / seconds / boundPerS,
      maxInAnySecond,
      limitHeld: maxInAnySecond <= Math.floor(rateLimit),
      meanInFlight: busyArea / (seconds * 1000),
      mainBusy,
      simBusy,
      cpuMsPerRequest: (cpu.user + cpu.system) / 1000 / requests,
      loopDelayP50Ms: loopDelay.percentile(50) / 1e6,
      loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
      p50LatencyMs: latencies[Math.floor(latencies.length / 2)] ?? 0,
      p95LatencyMs: latencies[Math.floor(latencies.length * 0.95)] ?? 0,
      ceilingPerS: rateLimit < concurrency / (latencyMs / 1000) ? null : await bareCeiling(sim, 2),
    };
  } finally {
    await dropSchema(w).catch(() => {});
    await w.close();
    await sim.close();
  }
}

/**
 * The client's own cost per request: the same history reads one at a time, through the client
 * and through a bare undici request, against the same simulator (p50 of each, ms).
 */
async function overhead(latencyMs: number): Promise<{ client: number; bare: number }> {
  const sim = await startRemoteSimulator(`latency=${latencyMs}ms`);
  try {
    const api = createServiceClient(
      {
        baseUrl: sim.baseUrl,
        legacyBaseUrl: undefined,
        serviceAccountToken: undefined,
        accessToken: sim.credentials.accessToken,
        tokenUrl: undefined,
        clientId: undefined,
        clientSecret: undefined,
        apiKey: undefined,
        timeoutMs: 30_000,
        rateLimitRps: 10_000,
        concurrency: 1,
      },
      log,
    );
    const ids = sim.threadIds.slice(0, 100);
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
    const viaClient: number[] = [];
    const bare: number[] = [];
    for (const id of ids) {
      let t = performance.now();
      await api.listMessages(id, { limitNum: pageSize }).catch(() => {});
      viaClient.push(performance.now() - t);
      t = performance.now();
      const res = await request(
        `${sim.baseUrl}/v2/threads/${id}/messages?start_index=0&limit_num=${pageSize}`,
        {
          headers: { authorization: `Bearer ${sim.credentials.accessToken}`, accept: 'application/json' },
        },
      );
      await res.body.text();
      bare.push(performance.now() - t);
    }
    return { client: median(viaClient), bare: median(bare) };
  } finally {
    await sim.close();
  }
}

console.log(
  `enrichment bench: concurrency ${concurrency}, page size ${pageSize}, simulator ${days} days × ${records} records/day, db ${describeUrl(url)}, node ${process.version}`,
);
const load = () => os.loadavg()[0]!.toFixed(1);
console.log(`machine: ${os.cpus().length} CPUs, load average ${load()} at start`);
const rows: Row[] = [];
for (const l of latencies) {
  rows.push(await run(l, rps));
  if (limitedRps > 0 && limitedRps < concurrency / (l / 1000)) rows.push(await run(l, limitedRps));
}
// Retries take grants from the same budget: with faults on, the limit must still hold.
const faults = flags.faults === 'none' ? '' : flags.faults;
if (limitedRps > 0 && faults !== '') rows.push(await run(latencies[0] ?? 10, limitedRps, faults));

const f = (n: number, d = 0) => n.toFixed(d);
const header = [
  'latency',
  'faults',
  'limit/s',
  'threads',
  'requests',
  'retries',
  'time s',
  'threads/s',
  'req/s',
  'bound/s',
  'of bound',
  'max in any 1 s',
  'limit held',
  'slots busy',
  'p50/p95 ms',
  'client/sim busy',
  'client CPU/req',
  'loop delay p50/p99',
  'bare req/s',
];
const table = rows.map((r) => [
  `${r.latencyMs} ms`,
  r.faults || '-',
  f(r.rateLimit),
  f(r.threads),
  f(r.requests),
  f(r.retries),
  f(r.seconds, 1),
  f(r.threadsPerS, 1),
  f(r.requestsPerS, 1),
  f(r.boundPerS),
  `${f(r.ofBound * 100)}%`,
  f(r.maxInAnySecond),
  r.limitHeld ? 'yes' : 'NO',
  `${f((r.meanInFlight / r.concurrency) * 100)}%`,
  `${f(r.p50LatencyMs)}/${f(r.p95LatencyMs)}`,
  `${f(r.mainBusy * 100)}%/${f(r.simBusy * 100)}%`,
  `${f(r.cpuMsPerRequest, 2)} ms`,
  `${f(r.loopDelayP50Ms, 1)}/${f(r.loopDelayP99Ms, 1)} ms`,
  r.ceilingPerS === null ? '-' : `${f(r.ceilingPerS)} (${f((r.ceilingPerS / r.boundPerS) * 100)}%)`,
]);
const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => r[i]!.length)));
const line = (cells: string[]) => `| ${cells.map((c, i) => c.padStart(widths[i]!)).join(' | ')} |`;
console.log(line(header));
console.log(`|${widths.map((wd) => '-'.repeat(wd + 2)).join('|')}|`);
for (const r of table) console.log(line(r));
console.log(
  `load average ${load()} at the end. "slots busy": time-weighted requests in flight ÷ concurrency (the client's own\n` +
    'efficiency); when it is near 100% and req/s is below the bound, responses took longer than the configured latency\n' +
    '(p50/p95: call to response headers, as the client saw them). "client/sim busy": event-loop utilisation of the\n' +
    "bench's main thread (client, enrichment, pg driver) and of the simulator's process; Postgres runs beside them.\n" +
    '"client CPU/req": CPU time (user + system) of the bench process during the enrichment ÷ requests. "loop delay":\n' +
    "p50/p99 of how late the client's event loop ran a 1 ms timer (a response waits that long when the loop is busy).\n" +
    '"bare req/s": the same simulator afterwards, `concurrency` loops of bare undici requests (a history page, then its\n' +
    'artifacts; no client, parsing or warehouse) for 2 s, and its share of the bound: what any client could reach on\n' +
    'this machine at that moment. The target stays ≥ 80% of the bound.',
);
const cost = await overhead(latencies[0] ?? 10);
console.log(
  `one request at a time at ${latencies[0] ?? 10} ms: p50 ${cost.client.toFixed(1)} ms through the client, ` +
    `${cost.bare.toFixed(1)} ms with a bare request (client overhead ${(cost.client - cost.bare).toFixed(1)} ms)`,
);
const ok = rows.every((r) => r.limitHeld && r.ofBound >= 0.8);
console.log(
  ok ? 'target met: every row ≥ 80% of its bound, limit never exceeded' : 'TARGET MISSED (see rows above)',
);
const out = path.resolve(import.meta.dirname, 'out');
mkdirSync(out, { recursive: true });
writeFileSync(
  path.join(out, `enrich-${new Date().toISOString().replace(/[:.]/g, '-')}.json`),
  JSON.stringify(rows, null, 2),
);
process.exitCode = ok ? 0 : 1;
