import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shiftDay, utcDay } from '../../src/common/civil-date.ts';
import { freePort } from '../../src/common/net.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { syncIntraday, syncWindow } from '../../workflows/index.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { until } from './days.ts';
import { connectHarness, type TemporalHarness } from './harness.ts';
import { expectedRows, warehouseRows } from './truth.ts';

const root = path.resolve(import.meta.dirname, '..', '..');

/**
 * The real `crs-sync worker` command in child processes against a test's warehouse, simulator and
 * dev server, and the ledger reads a stop is timed by. `env` is read when a worker starts (the
 * test's beforeAll fills it).
 */
function workerKit(env: () => { h: TemporalHarness; tw: TestWarehouse; sim: Simulator }) {
  const workers: ChildProcess[] = [];

  function startWorker(metricsAddress: string): ChildProcess {
    const { h, tw, sim } = env();
    const child = spawn(process.execPath, [path.join(root, 'bin', 'crs-sync.js'), 'worker'], {
      cwd: root,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ...sim.env(),
        DATABASE_URL: tw.url,
        CRS_SCHEMA: tw.schema,
        TEMPORAL_ADDRESS: h.address,
        TEMPORAL_NAMESPACE: h.namespace,
        TEMPORAL_TASK_QUEUE: h.taskQueue,
        TEMPORAL_METRICS_ADDRESS: metricsAddress,
        TEMPORAL_SHUTDOWN_GRACE: '1s',
        // Small batches: many checkpoints, so a kill lands between two of them.
        CRS_BATCH_SIZE: '100',
        CRS_LOAD_PARTITIONS: '2',
        CRS_RATE_LIMIT_RPS: '1000',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr?.resume();
    workers.push(child);
    return child;
  }

  /** Lines committed by the running attempt, with that attempt's number; undefined when none runs. */
  async function running(day: string): Promise<{ lines: number; attempt: number } | undefined> {
    const r = await env()
      .tw.w.db.selectFrom('sync_days')
      .select(['lines_committed', 'status', 'attempts'])
      .where('day', '=', day)
      .executeTakeFirst();
    return r?.status === 'running' ? { lines: r.lines_committed, attempt: r.attempts } : undefined;
  }

  async function status(day: string): Promise<string | undefined> {
    const r = await env()
      .tw.w.db.selectFrom('sync_days')
      .select('status')
      .where('day', '=', day)
      .executeTakeFirst();
    return r?.status;
  }

  /**
   * Waits for an attempt after #`after` to have committed `fraction` of the day's `total` lines
   * (not all of them): a killed attempt's row still reads 'running' until the next attempt
   * begins, and must not be stopped twice.
   */
  function midDay(day: string, total: number, fraction: number, after: number) {
    return until(
      async () => {
        const r = await running(day);
        return r && r.attempt > after && r.lines >= fraction * total && r.lines < total ? r : undefined;
      },
      `${fraction * 100}% of ${day} to be committed by an attempt after #${after}`,
      120_000,
    );
  }

  function killAll(): void {
    for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
  }

  return { startWorker, running, status, midDay, killAll };
}

// The real `crs-sync worker` command in child processes, killed in the middle of a day's load.
describe('a worker killed in the middle of a day (real worker command, simulator, Postgres, dev server)', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator;
  const frozen = new Date();
  const day = shiftDay(utcDay(new Date()), -2);
  const { startWorker, midDay, status, killAll } = workerKit(() => ({ h, tw, sim }));

  beforeAll(async () => {
    h = await connectHarness('kill');
    tw = await createTestWarehouse({ prefix: 'tkill' });
    sim = await startSimulator({
      port: 0,
      // A stopped clock: no record arrives late and no thread is deleted while the test compares.
      now: () => frozen,
      seed: 11,
      days: 4,
      recordsPerDay: 20_000,
      faults: 'none',
    });
  });

  afterAll(async () => {
    killAll();
    await sim?.close();
    await tw?.dispose();
    await h?.close();
  });

  it('when the worker is killed with SIGKILL three times (and stopped with SIGTERM once) in the middle of a day, then the run ends with the warehouse equal to the export', async () => {
    const total = sim.truth.exportDayLines(day).length;
    expect(total).toBeGreaterThan(10_000);
    const handle = await h.client.workflow.start(syncWindow, {
      taskQueue: h.taskQueue,
      workflowId: `kill-${day}`,
      // A short heartbeat timeout and first retry interval: a dead worker's load is retried within
      // seconds (the policy's 5 s doubling would wait 75 s in all over the four stops).
      args: [
        { kind: 'manual', from: day, to: day, enrich: false, heartbeatTimeout: '3s', retryInterval: '250ms' },
      ],
    });

    const metricsAddress = `127.0.0.1:${await freePort()}`;
    let worker = startWorker(metricsAddress);
    const stops: { at: number; how: NodeJS.Signals; exit: number | null; attempt: number }[] = [];
    // The drain comes last: a drained attempt goes on committing for its grace period (longer on
    // a loaded machine), possibly to the end of the day, so no fixed fraction could follow it.
    let drainFinishedDay = false;
    for (const [fraction, how] of [
      [0.15, 'SIGKILL'],
      [0.35, 'SIGKILL'],
      [0.55, 'SIGKILL'],
      [0.75, 'SIGTERM'],
    ] as const) {
      // Each stop waits for an attempt started after the previous stop.
      const { lines: at, attempt } = await midDay(day, total, fraction, stops.at(-1)?.attempt ?? 0);
      if (stops.length === 0) {
        // The SDK's Prometheus endpoint of the first worker answers with its metrics.
        const text = await (await fetch(`http://${metricsAddress}/metrics`)).text();
        expect(text).toMatch(/temporal_/);
      }
      const exited = once(worker, 'exit');
      worker.kill(how);
      const [code] = (await exited) as [number | null];
      stops.push({ at, how, exit: code, attempt });
      if (how === 'SIGTERM') drainFinishedDay = (await status(day)) === 'complete';
      worker = startWorker('');
    }
    const result = await handle.result();

    // A drained worker exits cleanly; killed ones are simply gone.
    expect(stops.find((s) => s.how === 'SIGTERM')?.exit).toBe(0);
    expect(stops.map((s) => s.at)).toEqual([...stops.map((s) => s.at)].sort((a, b) => a - b));
    const row = await tw.w.db
      .selectFrom('sync_days')
      .selectAll()
      .where('day', '=', day)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('complete');
    // Four stops, each in an attempt of its own, and the attempt that finished (unless the
    // drained one did).
    expect(stops.map((s) => s.attempt)).toEqual(
      [...new Set(stops.map((s) => s.attempt))].sort((a, b) => a - b),
    );
    expect(row.attempts).toBeGreaterThanOrEqual(drainFinishedDay ? 4 : 5);
    expect(row.lines_committed).toBe(total);
    const expected = expectedRows(sim, [day]);
    expect(result.totals.daysLoaded).toBe(1);
    expect(result.totals.inserted).toBe(expected.length);
    expect(await warehouseRows(tw.w, [day])).toEqual(expected);
  }, 300_000);
});

// An intraday pull of the open day (workflows/sync-intraday.ts) by the real worker command,
// killed in the middle of the day's load.
describe('a worker killed in the middle of an intraday pull of the open day (real worker command, simulator, Postgres, dev server)', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator;
  // A pinned clock, moved by hand between pulls and standing still while one runs and the test
  // compares; months before the days the test above loads (day workflow ids are the namespace's).
  const day = '2026-06-15';
  let clock = Date.parse(`${day}T09:00:00Z`);
  const { startWorker, midDay, killAll } = workerKit(() => ({ h, tw, sim }));

  beforeAll(async () => {
    h = await connectHarness('kill');
    tw = await createTestWarehouse({ prefix: 'tkillopen' });
    sim = await startSimulator({
      port: 0,
      now: () => new Date(clock),
      seed: 11,
      days: 3,
      recordsPerDay: 20_000,
      faults: 'none',
    });
  });

  afterAll(async () => {
    killAll();
    await sim?.close();
    await tw?.dispose();
    await h?.close();
  });

  const pull = (n: number) =>
    h.client.workflow.start(syncIntraday, {
      taskQueue: h.taskQueue,
      workflowId: `kill-intraday-${n}`,
      // A short heartbeat timeout and first retry interval: a dead worker's load is retried within seconds.
      args: [
        { enrich: false, now: new Date(clock).toISOString(), heartbeatTimeout: '3s', retryInterval: '250ms' },
      ],
    });
  const ledger = () =>
    tw.w.db.selectFrom('sync_days').selectAll().where('day', '=', day).executeTakeFirstOrThrow();

  it('when the worker is killed with SIGKILL in the middle of an intraday pull, then the retry ends with the day’s rows equal to its export so far, the day partial, and nothing of it deleted', async () => {
    let worker = startWorker('');
    // The morning's pull: rows the afternoon's pull must keep, whatever happens upstream.
    await (await pull(1)).result();
    const morning = expectedRows(sim, [day]);
    expect(await warehouseRows(tw.w, [day])).toEqual(morning);
    const attemptsBefore = (await ledger()).attempts;

    clock = Date.parse(`${day}T18:00:00Z`);
    const total = sim.truth.exportDayLines(day).length;
    const expected = expectedRows(sim, [day]);
    expect(total).toBeGreaterThan(10_000);
    expect(expected.length).toBeGreaterThan(morning.length);
    // Threads the service deleted since the morning: a complete load would delete their rows.
    const gone = morning.filter((r) => sim.truth.isDeleted(r.thread_id));
    expect(gone.length).toBeGreaterThan(0);

    const handle = await pull(2);
    const killed = await midDay(day, total, 0.4, attemptsBefore);
    const exited = once(worker, 'exit');
    worker.kill('SIGKILL');
    await exited;
    worker = startWorker('');
    const result = await handle.result();

    expect(result.failedDays).toEqual([]);
    const row = await ledger();
    expect(row.status).toBe('partial');
    expect(row.export_complete).toBe(false);
    // The killed attempt, then the retry that finished the pull, resuming the same load.
    expect(row.attempts).toBeGreaterThan(killed.attempt);
    expect(row._load_id).toBe(result.runId);
    expect(row.lines_committed).toBe(total);
    expect(row.rows_deleted).toBe(0);
    // The export so far, exactly, and the rows of the threads deleted upstream still live.
    const rows = await warehouseRows(tw.w, [day]);
    expect(rows.filter((r) => !sim.truth.isDeleted(r.thread_id))).toEqual(expected);
    expect(rows.filter((r) => sim.truth.isDeleted(r.thread_id))).toEqual(gone);
    const marked = await tw.w.db
      .selectFrom('analytics_messages')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('message_date', '=', day)
      .where('_deleted_at', 'is not', null)
      .executeTakeFirstOrThrow();
    expect(Number(marked.n)).toBe(0);
  }, 300_000);
});
