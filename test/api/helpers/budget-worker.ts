/**
 * One worker process of the shared-budget test (test/api/shared-budget-processes.test.ts): a
 * service client on the warehouse's shared budget that asks the simulator for its thread list
 * REQUESTS times, all queued at once, and reports on stdout as JSON lines:
 *   {"event":"ready"}                        the client exists; it starts on a line "go" on stdin
 *   {"event":"throttled","at":<epoch ms>}    THROTTLE_AFTER: the 429 with Retry-After arrived
 *   {"event":"progress","ok":n}              every 20 requests done
 *   {"event":"done","first":…,"last":…,"ok":n,"failed":n,"starts":[epoch ms of each HTTP attempt]}
 * With HOLD=1 it only leases the whole budget (CRS_RATE_LIMIT_RPS grants), says
 *   {"event":"holding","granted":n}
 * and waits to be killed: a worker that dies holding grants.
 * With THROTTLE_AFTER=n, once n of its requests are done it sends one more request carrying the
 * simulator's fault header (429 with Retry-After THROTTLE_SEC), through a second client sharing
 * the same budget, without retries: the pause it records must hold the other processes too.
 */
import { createInterface } from 'node:readline';
import { request } from 'undici';
import { createServiceClient, type ServiceClientOptions } from '../../../src/api/index.ts';
import { createLogger } from '../../../src/log.ts';
import { FAULT_HEADER } from '../../../src/simulator/openapi.ts';
import { openWarehouse } from '../../../src/warehouse/db.ts';
import { openRateBudget } from '../../../src/warehouse/rate-budget.ts';

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};

const say = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);

const log = createLogger({ level: 'warn', pretty: false, destination: process.stderr });
const warehouse = openWarehouse({ url: env('DATABASE_URL'), schema: env('CRS_SCHEMA'), max: 1 });
const store = openRateBudget(warehouse, env('CRS_SHARED_BUDGET_NAME'), log);
// How long each lease takes (one statement on the budget's own connection), for the measurements.
const leaseMs: number[] = [];
const budget: typeof store = {
  ...store,
  lease: async (want, limit, windowMs) => {
    const t = performance.now();
    const r = await store.lease(want, limit, windowMs);
    leaseMs.push(performance.now() - t);
    return r;
  },
};
const requests = Number(env('REQUESTS'));
const throttleAfter = Number(process.env.THROTTLE_AFTER ?? '0');
const starts: number[] = [];

const options: ServiceClientOptions = {
  baseUrl: env('CRS_BASE_URL'),
  legacyBaseUrl: undefined,
  serviceAccountToken: env('CRS_SERVICE_ACCOUNT_TOKEN'),
  accessToken: env('CRS_ACCESS_TOKEN'),
  tokenUrl: undefined,
  clientId: undefined,
  clientSecret: undefined,
  apiKey: undefined,
  timeoutMs: 10_000,
  rateLimitRps: Number(env('CRS_RATE_LIMIT_RPS')),
  // Far more than the budget needs at the simulator's latency on a loaded machine: the budget,
  // not the connections, must be what holds the process back.
  concurrency: 64,
  maxRetries: 6,
  baseBackoffMs: 20,
  maxBackoffMs: 200,
  budget,
  // Every attempt's start, where the limiter lets it go: the moment the budget controls.
  request: (url, o) => {
    starts.push(Date.now());
    return request(url, o);
  },
};
if (process.env.HOLD === '1') {
  const limit = Number(env('CRS_RATE_LIMIT_RPS'));
  const { granted } = await store.lease(limit, limit, 1_075);
  say({ event: 'holding', granted });
  await new Promise(() => setInterval(() => {}, 60_000));
}
const api = createServiceClient(options, log);
say({ event: 'ready' });
// All processes start together: a slow process start (a loaded machine) must not leave one
// alone with the budget before the others exist.
for await (const line of createInterface({ input: process.stdin })) if (line.trim() === 'go') break;

let first = 0;
let last = 0;
let ok = 0;
let failed = 0;
let throttled: Promise<void> | undefined;

async function one(): Promise<void> {
  first ||= Date.now();
  try {
    await api.listThreads();
    ok++;
    if (ok % 20 === 0) say({ event: 'progress', ok });
  } catch (err) {
    failed++;
    log.error({ err }, 'request failed');
  }
  last = Date.now();
  if (throttleAfter > 0 && ok === throttleAfter) throttled = throttle();
}

async function throttle(): Promise<void> {
  const sec = env('THROTTLE_SEC');
  const other = createServiceClient(
    { ...options, maxRetries: 0, extraHeaders: { [FAULT_HEADER]: `429=1:${sec}s` } },
    log,
  );
  try {
    await other.listThreads();
    say({ event: 'error', message: 'the throttled request succeeded' });
  } catch {
    say({ event: 'throttled', at: Date.now() });
  }
}

await Promise.all(Array.from({ length: requests }, () => one()));
await throttled;
leaseMs.sort((x, y) => x - y);
const pct = (p: number) =>
  Number((leaseMs[Math.min(leaseMs.length - 1, Math.floor(p * leaseMs.length))] ?? 0).toFixed(2));
say({
  event: 'done',
  first,
  last,
  ok,
  failed,
  starts,
  budget: { ...api.stats().budget, leaseMsP50: pct(0.5), leaseMsP99: pct(0.99) },
});
await budget.close();
await warehouse.close();
// stdin (the "go" line) is still open and would keep the process alive.
process.stdin.destroy();
