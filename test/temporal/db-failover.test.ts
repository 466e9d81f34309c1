import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { shiftDay } from '../../src/common/civil-date.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { openWarehouse, type Warehouse } from '../../src/warehouse/db.ts';
import { syncWindow } from '../../workflows/index.ts';
import { simulatorOptions } from '../api/helpers/client-setup.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { randomDays, until } from './days.ts';
import { connectHarness, createTestWorker, type TemporalHarness, testLog } from './harness.ts';
import { expectedRows, warehouseRows } from './truth.ts';

/**
 * A warehouse failover in the middle of a day's load, end to end: the worker's database sessions
 * are terminated twice while it loads (real dev server, real worker in this process, the
 * simulator over HTTP, Postgres). The worker lives on (an unhandled pg 'error' would end this
 * process), Temporal retries the load, and the day ends equal to the export.
 */
describe('a warehouse failover in the middle of a day', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let w: Warehouse;
  let sim: Simulator;
  const APP = `crs-failover-${randomBytes(3).toString('hex')}`;
  // A random stretch of the past: day workflow ids are shared by the files of this namespace.
  const today = randomDays(1)[0]!;
  const day = shiftDay(today, -1);

  beforeAll(async () => {
    h = await connectHarness('integration');
    tw = await createTestWarehouse({ prefix: 'tfail' });
    w = openWarehouse({ url: tw.url, schema: tw.schema, max: 10, applicationName: APP });
    const frozen = new Date(`${today}T06:00:00Z`);
    sim = await startSimulator({
      port: 0,
      now: () => frozen,
      seed: 17,
      days: 3,
      recordsPerDay: 20_000,
      faults: 'none',
    });
  });

  afterAll(async () => {
    await sim?.close();
    await w?.close();
    await tw?.dispose();
    await h?.close();
  });

  async function attempt(): Promise<{ lines: number; attempts: number; status: string } | undefined> {
    const r = await tw.w.db
      .selectFrom('sync_days')
      .select(['lines_committed', 'status', 'attempts'])
      .where('day', '=', day)
      .executeTakeFirst();
    return r ? { lines: r.lines_committed, attempts: r.attempts, status: r.status } : undefined;
  }

  async function terminate(): Promise<number> {
    const r = await tw.w.pool.query<{ n: number }>(
      'select count(pg_terminate_backend(pid))::int n from pg_stat_activity where application_name = $1',
      [APP],
    );
    return r.rows[0]?.n ?? 0;
  }

  it("when the worker's database sessions are terminated twice mid-load, then the load is retried and the day equals the export", async () => {
    const total = sim.truth.exportDayLines(day).length;
    expect(total).toBeGreaterThan(5000);
    const worker = await createTestWorker(h, {
      warehouse: w,
      client: createServiceClient(simulatorOptions(sim), testLog),
      env: { CRS_BATCH_SIZE: '100' },
    });
    const cuts: Array<{ lines: number; attempts: number; killed: number }> = [];
    const result = await worker.runUntil(async () => {
      const handle = await h.client.workflow.start(syncWindow, {
        taskQueue: h.taskQueue,
        workflowId: `failover-${day}-${randomBytes(3).toString('hex')}`,
        // The load's next attempt 250 ms after a cut, then 500 ms (the policy's own: 5 s, then 10 s).
        args: [
          {
            kind: 'manual',
            from: day,
            to: day,
            enrich: false,
            heartbeatTimeout: '5s',
            retryInterval: '250ms',
          },
        ],
      });
      for (const fraction of [0.25, 0.6]) {
        const after = cuts.at(-1)?.attempts ?? 0;
        const at = await until(
          async () => {
            const a = await attempt();
            return a &&
              a.status === 'running' &&
              a.attempts > after &&
              a.lines >= fraction * total &&
              a.lines < total
              ? a
              : undefined;
          },
          `${fraction * 100}% of the day committed by an attempt after #${after}`,
          120_000,
        );
        cuts.push({ lines: at.lines, attempts: at.attempts, killed: await terminate() });
      }
      return handle.result();
    });

    for (const c of cuts) expect(c.killed).toBeGreaterThan(0);
    const row = await tw.w.db
      .selectFrom('sync_days')
      .selectAll()
      .where('day', '=', day)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('complete');
    expect(row.attempts).toBeGreaterThanOrEqual(3);
    expect(row.lines_committed).toBe(total);
    const expected = expectedRows(sim, [day]);
    expect(result.totals.daysLoaded).toBe(1);
    expect(result.totals.inserted).toBe(expected.length);
    expect(await warehouseRows(tw.w, [day])).toEqual(expected);
  }, 300_000);
});
