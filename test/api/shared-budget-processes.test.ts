import { type ChildProcess, spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { BUDGET_HOLD_MS, rateBudgetOnPool } from '../../src/warehouse/rate-budget.ts';
import { arrivalsLine, budgetGrants, budgetPauses, installBudgetAudit } from '../helpers/budget-audit.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { maxInAnyWindow } from './helpers/scripted-server.ts';

/**
 * The deployment's request budget across separate processes (child processes, each with its
 * own service client and its own database connection), against the simulator over real HTTP.
 * The assertions are on what the budget promises, as the database recorded it
 * (test/helpers/budget-audit.ts): its grants, at most the limit in any window of 1 s + the hold
 * by the database's clock, none during a Retry-After pause, and no request reaching the simulator
 * without one. The simulator's arrivals per second, and the processes' own starts, are printed:
 * a request started within the limit can be held up in transit (or in a busy event loop before
 * its start is noted) and land in the next second, which no client controls.
 */

const LIMIT = 50;
const SURVIVOR_REQUESTS = 400;
const worker = path.resolve(import.meta.dirname, 'helpers', 'budget-worker.ts');

interface Done {
  event: 'done';
  first: number;
  last: number;
  ok: number;
  failed: number;
  starts: number[];
  budget?: { leases: number; wasted: number };
}

interface Child {
  proc: ChildProcess;
  events: Array<Record<string, unknown>>;
  /** Resolves with the first event named `name`. */
  next(name: string): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
}

let sim: Simulator;
let tw: TestWarehouse;
const children: Child[] = [];

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'tbudget' });
  await installBudgetAudit(tw.w.pool, tw.schema);
  // A small data set: the thread list is short, so each request is cheap for the simulator.
  sim = await startSimulator({ port: 0, seed: 14, days: 1, recordsPerDay: 20, faults: 'none', admin: true });
});

afterAll(async () => {
  for (const c of children)
    if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
  await sim?.close();
  await tw?.dispose();
});

function start(budget: string, requests: number, extra: Record<string, string> = {}): Child {
  const proc = spawn(process.execPath, [worker], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: tw.url,
      CRS_SCHEMA: tw.schema,
      CRS_SHARED_BUDGET_NAME: budget,
      CRS_RATE_LIMIT_RPS: String(LIMIT),
      CRS_BASE_URL: sim.baseUrl,
      CRS_SERVICE_ACCOUNT_TOKEN: sim.credentials.serviceAccountToken,
      CRS_ACCESS_TOKEN: sim.credentials.accessToken,
      REQUESTS: String(requests),
      ...extra,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const events: Array<Record<string, unknown>> = [];
  const waiting: Array<{ name: string; resolve: (e: Record<string, unknown>) => void }> = [];
  createInterface({ input: proc.stdout }).on('line', (line) => {
    const e = JSON.parse(line) as Record<string, unknown>;
    events.push(e);
    for (const w of waiting.filter((x) => x.name === e.event)) w.resolve(e);
  });
  let stderr = '';
  proc.stderr?.on('data', (b: Buffer) => {
    stderr += b.toString('utf8');
  });
  const exited = new Promise<number | null>((resolve) =>
    proc.on('exit', (code) => {
      if (code !== 0 && code !== null) process.stderr.write(`budget worker exited ${code}:\n${stderr}\n`);
      resolve(code);
    }),
  );
  const child: Child = {
    proc,
    events,
    exited,
    next: (name) => {
      const seen = events.find((e) => e.event === name);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve) => waiting.push({ name, resolve }));
    },
  };
  children.push(child);
  return child;
}

interface Arrivals {
  perSecond: Record<string, number>;
  maxPerSecond: number;
  maxInAnySecond: number;
  total: number;
}

async function arrivals(): Promise<Arrivals> {
  const res = await fetch(`${sim.baseUrl}/_sim/requests`);
  return (await res.json()) as Arrivals;
}

/** Starts the children's requests together, once every one of them is ready. */
async function go(...cs: Child[]): Promise<void> {
  await Promise.all(cs.map((c) => c.next('ready')));
  for (const c of cs) c.proc.stdin?.write('go\n');
}

/** Arrivals in each whole second of the simulator's clock lying within [fromMs, toMs]. */
function fullSeconds(a: Arrivals, fromMs: number, toMs: number): number[] {
  const out: number[] = [];
  for (let s = Math.ceil(fromMs / 1000); (s + 1) * 1000 <= toMs; s++) out.push(a.perSecond[String(s)] ?? 0);
  return out;
}

/** Starts in each whole second (epoch) lying within [fromMs, toMs]. */
function startsIn(starts: number[], fromMs: number, toMs: number): number[] {
  const out: number[] = [];
  for (let s = Math.ceil(fromMs / 1000); (s + 1) * 1000 <= toMs; s++)
    out.push(starts.filter((t) => t >= s * 1000 && t < (s + 1) * 1000).length);
  return out;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe('one request budget for three worker processes (Postgres, simulator over HTTP)', () => {
  it(`when three processes with queued work share ${LIMIT} requests/s, then the budget grants no more than ${LIMIT} in any window, every request the simulator saw had a grant, and a process SIGKILLed mid-run leaves the whole budget to the others`, async () => {
    const before = await arrivals();
    // The survivors have ~10 s of work left at the kill: on a busy machine the kill can come
    // seconds after the 240th request (the children's progress lines arrive late), and with 220
    // each one survivor once finished within a second of it, leaving no whole second of two.
    const a = start('limit', SURVIVOR_REQUESTS);
    const b = start('limit', SURVIVOR_REQUESTS);
    const c = start('limit', 220);
    await go(a, b, c);
    // c leases a block every few requests, so when it dies it holds one (or had one within the
    // window); killed on its own word, so the simulator is not polled while it counts.
    // Killed once the three have done 240 requests between them (about 5 s) and c at least 20:
    // shares between workers are not equal, so c's own count alone could come too early.
    const done = (x: Child) => Math.max(0, ...x.events.map((e) => Number(e.ok ?? 0)));
    await new Promise<void>((resolve) => {
      const check = () =>
        done(a) + done(b) + done(c) >= 240 && done(c) >= 20 ? resolve() : setTimeout(check, 10);
      check();
    });
    c.proc.kill('SIGKILL');
    const killedAt = Date.now();
    const doneAtKill = [a, b, c].map(done);
    await c.exited;
    const [da, db] = (await Promise.all([a.next('done'), b.next('done')])) as unknown as Done[];
    const after = await arrivals();
    // Read after the simulator's count: every request it counted took its grant before.
    const granted = await budgetGrants(tw.w.pool, tw.schema, 'limit');
    for (const d of [da, db]) {
      expect(d?.failed).toBe(0);
      expect(d?.ok).toBe(SURVIVOR_REQUESTS);
    }
    const load = os.loadavg()[0]?.toFixed(1);
    const seconds = Object.keys(after.perSecond)
      .map((s) => [Number(s), (after.perSecond[s] ?? 0) - (before.perSecond[s] ?? 0)] as const)
      .filter(([, n]) => n > 0);
    const perSecond = seconds.map(([, n]) => n);
    // The starts of the surviving processes (c's died with it): the moment the budget controls.
    const starts = [...(da?.starts ?? []), ...(db?.starts ?? [])].sort((x, y) => x - y);
    // From a second after the start: the processes' first leases and a cold JIT are not the
    // budget's steady state.
    const startedBy = Math.max(...[da, db].map((d) => d?.first ?? 0)) + 1_000;
    const whileThree = fullSeconds(after, startedBy, killedAt);
    // After the kill, past the window in which a dead process's block still counts (1 s + hold).
    const whileTwo = fullSeconds(after, killedAt + 1_100, Math.min(da?.last ?? 0, db?.last ?? 0));
    console.log(
      `shared budget ${LIMIT}/s, 3 processes (load ${load} on ${os.cpus().length} cores): simulator arrivals per second ` +
        `${JSON.stringify(seconds)}; max per second ${Math.max(...perSecond)}, max in any sliding second ` +
        `${after.maxInAnySecond}; survivors' starts, max in any sliding second ${maxInAnyWindow(starts, 1000)}; ` +
        `three queued ${JSON.stringify(whileThree)}, two left after the kill ${JSON.stringify(whileTwo)}; ` +
        `done (a, b, c) when c was killed: ${JSON.stringify(doneAtKill)}; ` +
        `budget stats ${JSON.stringify([da?.budget, db?.budget])}; survivors' starts in those seconds ` +
        `${JSON.stringify(startsIn(starts, killedAt + 1_100, Math.min(da?.last ?? 0, db?.last ?? 0)))}; ` +
        `granted ${granted.net} (${granted.leased} leased, ${granted.released} given back) in ${granted.blocks} blocks, ` +
        `most in any ${granted.windowMs} ms of database time ${granted.maxInWindow}, for ${after.total - before.total} requests`,
    );
    // What the budget promises, in the database's time: the limit in any window of 1 s + hold …
    expect(granted).toMatchObject({ limit: LIMIT, windowMs: 1000 + BUDGET_HOLD_MS });
    expect(granted.maxInWindow).toBeGreaterThan(0);
    expect(granted.maxInWindow).toBeLessThanOrEqual(LIMIT);
    // … and no request without a grant (c's requests included: its grants are in the row too).
    expect(after.total - before.total, 'requests the simulator saw beyond the grants').toBeLessThanOrEqual(
      granted.net,
    );
    expect(whileThree.length).toBeGreaterThan(0);
    expect(whileTwo.length).toBeGreaterThan(0);
    // Use of the limit is a rate: it depends on how fast this machine runs the three processes,
    // so it is measured by `node test/api/helpers/budget-measure.ts` and bench:backfill (quoted in
    // docs/decisions/0009), and only printed here: no timing assertion in a test.
    console.log(
      `use of the limit: ${Math.round((100 * mean(whileThree)) / LIMIT)}% with three, ` +
        `${Math.round((100 * mean(whileTwo)) / LIMIT)}% with two (load ${load})`,
    );
  });

  it('when a process holding the whole budget is SIGKILLed, then the budget is whole again one window later', async () => {
    const hog = start('dead-holder', 0, { HOLD: '1' });
    const holding = (await hog.next('holding')) as { granted: number };
    expect(holding.granted).toBe(LIMIT);
    hog.proc.kill('SIGKILL');
    await hog.exited;
    const store = rateBudgetOnPool(tw.w.pool, 'dead-holder');
    // Its grants still count (they may have been spent just before it died)…
    const during = await store.lease(LIMIT, LIMIT, 1_075);
    expect(during.granted).toBe(0);
    // …until its block leaves the window: then all of it is there for the others.
    await new Promise((r) => setTimeout(r, during.waitMs + 20));
    expect((await store.lease(LIMIT, LIMIT, 1_075)).granted).toBe(LIMIT);
  });

  it('when one process gets a 429 with Retry-After: 3, then the budget grants nothing to any process until the pause ends', async () => {
    const before = await arrivals();
    const a = start('pause', 130, { THROTTLE_AFTER: '20', THROTTLE_SEC: '3' });
    const b = start('pause', 200);
    const c = start('pause', 200);
    await go(a, b, c);
    const throttled = (await a.next('throttled')) as { at: number };
    const dones = (await Promise.all([a, b, c].map((x) => x.next('done')))) as unknown as Done[];
    const after = await arrivals();
    const granted = await budgetGrants(tw.w.pool, tw.schema, 'pause');
    const pauses = await budgetPauses(tw.w.pool, tw.schema, 'pause');
    expect(dones.map((d) => [d.ok, d.failed])).toEqual([
      [130, 0],
      [200, 0],
      [200, 0],
    ]);
    // The seconds well inside the pause (its start is when the 429 reached process a).
    const paused = fullSeconds(after, throttled.at + 300, throttled.at + 2_900).map(
      (n, i) => n - (before.perSecond[String(Math.ceil((throttled.at + 300) / 1000) + i)] ?? 0),
    );
    console.log(
      `429 with Retry-After 3 s at ${throttled.at}: arrivals in the paused seconds ${JSON.stringify(paused)} ` +
        `(printed, not asserted); all ${after.total - before.total} requests served, ${granted.net} granted; ` +
        `pauses in database time ${JSON.stringify(pauses)}; arrivals per second ${arrivalsLine(after.perSecond, before.perSecond)}`,
    );
    // One pause, in the database's time; no grant inside it, and the
    // others' queued requests were granted after it (they waited rather than ran out).
    expect(pauses).toHaveLength(1);
    // Its end is the Retry-After from when the pause was asked; its start, when the row took it.
    expect(pauses[0]!.lengthMs).toBeGreaterThan(0);
    expect(pauses[0]!.lengthMs).toBeLessThanOrEqual(3_001);
    expect(pauses[0]!.grantsDuring).toBe(0);
    expect(pauses[0]!.grantsAfter).toBeGreaterThan(0);
    expect(after.total - before.total, 'requests the simulator saw beyond the grants').toBeLessThanOrEqual(
      granted.net,
    );
  });
});
