/**
 * Measures the shared request budget (not a test): WORKERS processes (default 3) of
 * budget-worker.ts share LIMIT requests/s (default 50) against the simulator, each with REQUESTS
 * queued (default 400). Prints the simulator's arrivals per second, the most in any second
 * (whole and sliding), the use of the limit while every process was queued, what the budget
 * granted by the database's clock (test/helpers/budget-audit.ts: the most in any window of
 * 1 s + hold, which is what the budget promises, and all of them against the requests the
 * simulator counted), and per process the requests it got, its leases, grants wasted and lease
 * latency.
 *
 *   [TEST_DATABASE_URL=…] node test/api/helpers/budget-measure.ts
 *
 * Its schema goes on the test database (test/helpers/test-database.ts), never DATABASE_URL.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { startSimulator } from '../../../src/simulator/index.ts';
import { openWarehouse } from '../../../src/warehouse/db.ts';
import { dropSchema, migrateToLatest } from '../../../src/warehouse/migrator.ts';
import { budgetGrants, installBudgetAudit } from '../../helpers/budget-audit.ts';
import { testDatabaseUrl } from '../../helpers/test-database.ts';
import { maxInAnyWindow } from './scripted-server.ts';

const url = testDatabaseUrl();
const workers = Number(process.env.WORKERS ?? 3);
const limit = Number(process.env.LIMIT ?? 50);
const requests = Number(process.env.REQUESTS ?? 400);
const schema = `bm_${randomBytes(4).toString('hex')}`;
const w = openWarehouse({ url, schema, max: 2 });
await migrateToLatest(w);
await installBudgetAudit(w.pool, schema);
const sim = await startSimulator({
  port: 0,
  seed: 14,
  days: 1,
  recordsPerDay: 20,
  faults: 'none',
  admin: true,
});

interface Done {
  first: number;
  last: number;
  ok: number;
  starts: number[];
  budget: Record<string, number>;
}

const children = Array.from({ length: workers }, () => {
  const proc = spawn(process.execPath, [path.join(import.meta.dirname, 'budget-worker.ts')], {
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: url,
      CRS_SCHEMA: schema,
      CRS_SHARED_BUDGET_NAME: 'measure',
      CRS_RATE_LIMIT_RPS: String(limit),
      CRS_BASE_URL: sim.baseUrl,
      CRS_SERVICE_ACCOUNT_TOKEN: sim.credentials.serviceAccountToken,
      CRS_ACCESS_TOKEN: sim.credentials.accessToken,
      REQUESTS: String(requests),
    },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let ready: () => void = () => {};
  let finished: (d: Done) => void = () => {};
  const isReady = new Promise<void>((r) => {
    ready = r;
  });
  const done = new Promise<Done>((r) => {
    finished = r;
  });
  createInterface({ input: proc.stdout }).on('line', (line) => {
    const e = JSON.parse(line) as { event: string } & Done;
    if (e.event === 'ready') ready();
    if (e.event === 'done') finished(e);
  });
  return { proc, isReady, done };
});
await Promise.all(children.map((c) => c.isReady));
const goAt = Date.now();
for (const c of children) c.proc.stdin.write('go\n');
const dones = await Promise.all(children.map((c) => c.done));
const report = (await (await fetch(`${sim.baseUrl}/_sim/requests`)).json()) as {
  perSecond: Record<string, number>;
  maxPerSecond: number;
  maxInAnySecond: number;
  total: number;
};
// After the simulator's count: every request it counted took its grant before.
const grants = await budgetGrants(w.pool, schema, 'measure');
const allQueuedUntil = Math.min(...dones.map((d) => d.last));
const full: number[] = [];
for (let s = Math.ceil(goAt / 1000); (s + 1) * 1000 <= allQueuedUntil; s++)
  full.push(report.perSecond[String(s)] ?? 0);
const used = full.reduce((a, b) => a + b, 0) / (full.length * limit);
const starts = dones.flatMap((d) => d.starts).sort((a, b) => a - b);
console.log(
  JSON.stringify({
    load: os.loadavg().map((x) => Number(x.toFixed(2))),
    cores: os.cpus().length,
    workers,
    limit,
    requests,
    perSecond: Object.values(report.perSecond),
    maxPerSecond: report.maxPerSecond,
    maxInAnySlidingSecond: report.maxInAnySecond,
    startsMaxInAnySlidingSecond: maxInAnyWindow(starts, 1000),
    grants,
    requestsServed: report.total,
    secondsAllQueued: full.length,
    usedWhileAllQueued: Number(used.toFixed(3)),
    perWorker: dones.map((d) => ({ ok: d.ok, ...d.budget })),
  }),
);
await sim.close();
await dropSchema(w);
await w.close();
