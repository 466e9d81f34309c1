import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tallyHistories } from '../../bench/lib/backfill/histories.ts';
import {
  type RequestCounter,
  rateFigures,
  startRequestCounter,
} from '../../bench/lib/backfill/request-counter.ts';
import { startPollingWorker, type WorkerProcess } from '../../bench/lib/backfill/workers.ts';
import { compareWithTruth } from '../../bench/lib/chaos/compare.ts';
import { shiftDay } from '../../src/common/civil-date.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { BUDGET_HOLD_MS } from '../../src/warehouse/rate-budget.ts';
import { backfill } from '../../workflows/index.ts';
import { budgetGrants, installBudgetAudit } from '../helpers/budget-audit.ts';
import { testSeed } from '../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { until } from './days.ts';
import { connectHarness, type TemporalHarness } from './harness.ts';

const DAYS = 40;
const RECORDS_PER_DAY = 40;
/** The tenant's limit, given to every worker alike: it must hold for all of them together. */
const TENANT_RPS = 50;
/** Day loads at once in each worker: six days in flight need all three workers. */
const DAY_LOADS_PER_WORKER = 2;
const seed = testSeed(20261128, 'CHURN_SEED');
/** The workers' shared request budget (CRS_SHARED_BUDGET_NAME), whose grants the test audits. */
const BUDGET = 'churn';

// The real `crs-sync worker` command in three child processes on one task queue, one SIGKILLed
// and another added while a 40-day backfill with enrichment runs. The tenant's limit is checked
// where the workers promise it: the shared budget's grants, as the database recorded them
// (test/helpers/budget-audit.ts), with no request reaching the service without one. Every request
// also passes a counting front door, and the simulator counts what arrives: those arrivals are
// printed, not asserted (a request held up in transit lands in the next second, and no client
// controls that). The test waits on progress (days loaded, the backfill's result), not on time;
// its timeouts are only a net for a run that stopped moving.
describe('three workers on one task queue (real worker command, simulator, Postgres, dev server)', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator;
  let counter: RequestCounter;
  const frozen = new Date();
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    process.stdout.write(`churn test seed ${seed} (CHURN_SEED=${seed} repeats it)\n`);
    h = await connectHarness('churn');
    tw = await createTestWarehouse({ prefix: 'tchurn' });
    await installBudgetAudit(tw.w.pool, tw.schema);
    sim = await startSimulator({
      port: 0,
      // A stopped clock: no record arrives late and no thread changes while the test compares.
      now: () => frozen,
      seed,
      days: DAYS + 1,
      recordsPerDay: RECORDS_PER_DAY,
      faults: 'none',
      // Serves GET /_sim/requests: the simulator's own arrival counts per second.
      admin: true,
    });
    counter = await startRequestCounter(sim.baseUrl);
  });

  afterAll(async () => {
    for (const w of workers) await w.kill();
    await counter?.close();
    await sim?.close();
    await tw?.dispose();
    await h?.close();
  });

  /** A worker process on the test's task queue, once it polls. */
  async function start(name: string): Promise<WorkerProcess> {
    const where = { namespace: h.namespace, taskQueue: h.taskQueue };
    const w = await startPollingWorker(h.client, where, name, {
      ...counter.env(sim.env(), sim.baseUrl),
      DATABASE_URL: tw.url,
      CRS_SCHEMA: tw.schema,
      TEMPORAL_ADDRESS: h.address,
      TEMPORAL_NAMESPACE: h.namespace,
      TEMPORAL_TASK_QUEUE: h.taskQueue,
      TEMPORAL_SHUTDOWN_GRACE: '1s',
      TEMPORAL_MAX_CONCURRENT_DAY_LOADS: String(DAY_LOADS_PER_WORKER),
      CRS_RATE_LIMIT_RPS: String(TENANT_RPS),
      CRS_SHARED_BUDGET_NAME: BUDGET,
      CRS_LOAD_PARTITIONS: '2',
      CRS_ENRICH_CONCURRENCY: '4',
    });
    workers.push(w);
    return w;
  }

  async function daysIn(status: 'complete' | 'running'): Promise<number> {
    const r = await tw.w.db
      .selectFrom('sync_days')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('status', '=', status)
      .executeTakeFirstOrThrow();
    return Number(r.n);
  }

  it("when one of three workers is SIGKILLed and a fourth added during a 40-day backfill, then all take days, the warehouse equals the service and the budget's grants hold the tenant limit across them", async () => {
    const today = frozen.toISOString().slice(0, 10);
    const from = shiftDay(today, -DAYS);
    const to = shiftDay(today, -1);
    const days = Array.from({ length: DAYS }, (_, i) => shiftDay(from, i));
    const [w1, w2, w3] = await Promise.all([start('w1'), start('w2'), start('w3')]);
    const handle = await h.client.workflow.start(backfill, {
      taskQueue: h.taskQueue,
      workflowId: `churn-${seed}`,
      // A short heartbeat timeout and first retry interval: the killed worker's day loads are
      // retried within seconds.
      args: [
        {
          from,
          to,
          concurrency: 3 * DAY_LOADS_PER_WORKER,
          enrich: true,
          heartbeatTimeout: '3s',
          retryInterval: '250ms',
        },
      ],
    });
    // The kill lands while days load (not in an enrichment batch, whose heartbeat timeout is two
    // minutes), after a quarter of the days are done.
    await until(
      async () => (await daysIn('complete')) >= DAYS / 4 && (await daysIn('running')) > 0,
      'a quarter of the days loaded with more loading',
      420_000,
    );
    await w2.kill();
    const w4 = await start('w4');
    const result = await handle.result();

    const tally = await tallyHistories(h.client);
    const dayCount = (w: WorkerProcess) =>
      [...tally.dayWorker.values()].filter((x) => x === w.identity).length;
    const activities = (w: WorkerProcess) =>
      [...(tally.byWorker.get(w.identity)?.values() ?? [])].reduce((a, b) => a + b, 0);
    const rates = rateFigures(counter.arrivals());
    const served = (await (await fetch(`${sim.baseUrl}/_sim/requests`)).json()) as {
      maxPerSecond: number;
      maxInAnySecond: number;
      total: number;
    };
    // After the simulator's count: every request it counted took its grant before it was sent.
    const granted = await budgetGrants(tw.w.pool, tw.schema, BUDGET);
    process.stdout.write(
      `${[
        `churn seed ${seed}: ${DAYS} days, ${result.totals.rowsRead} rows, ${result.enrich?.threads ?? 0} threads`,
        ...[w1, w2, w3, w4].map(
          (w) =>
            `  ${w.name}${w === w2 ? ' (SIGKILLed)' : w === w4 ? ' (added)' : ''}: ${dayCount(w)} days, ${activities(w)} activities`,
        ),
        `  requests at the front door ${rates.requests}: most in one second ${rates.maxPerSecond}, in any 1000 ms ${rates.maxSliding} (limit ${TENANT_RPS})`,
        `  requests the simulator counted ${served.total}: most in one second ${served.maxPerSecond}, in any 1000 ms ${served.maxInAnySecond} (arrivals: printed, not asserted)`,
        `  budget ${BUDGET} granted ${granted.net} (${granted.leased} leased, ${granted.released} given back) in ${granted.blocks} blocks: most in any ${granted.windowMs} ms of database time ${granted.maxInWindow} (limit ${granted.limit})`,
      ].join('\n')}\n`,
    );

    expect(result.failedDays).toEqual([]);
    expect(result.totals.daysLoaded + result.totals.daysAttached).toBe(DAYS);
    // Every day's load is on record, and every worker that ran long enough took some.
    expect(tally.dayWorker.size).toBe(DAYS);
    for (const w of [w1, w2, w3]) expect(dayCount(w), `${w.name}'s days`).toBeGreaterThan(0);
    expect(activities(w4), "the added worker's activities").toBeGreaterThan(0);
    const cmp = await compareWithTruth(tw.w, sim, days);
    // The simulator's days vary in size around RECORDS_PER_DAY; all of them are compared.
    expect(cmp.compared.analytics_messages).toBeGreaterThan(DAYS * (RECORDS_PER_DAY / 2));
    expect(cmp.compared.threads).toBeGreaterThan(0);
    expect(Object.values(cmp.differences).flat()).toEqual([]);
    // The tenant's limit, across every worker, the killed one included: the budget granted at
    // most the limit in any window of 1 s + the hold, and the service saw no request without a grant.
    expect(served.total).toBeGreaterThan(DAYS);
    expect(granted).toMatchObject({ limit: TENANT_RPS, windowMs: 1000 + BUDGET_HOLD_MS });
    expect(granted.maxInWindow).toBeGreaterThan(0);
    expect(granted.maxInWindow).toBeLessThanOrEqual(TENANT_RPS);
    expect(served.total, 'requests the simulator saw beyond the grants').toBeLessThanOrEqual(granted.net);
  }, 600_000);
});
