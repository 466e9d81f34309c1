import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger, type LogEntry } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.ts';
import { createHeartbeat } from '../../activities/keep-alive.ts';
import { createProgressBeat } from '../../activities/progress-beat.ts';
import { closedDayLoad } from '../../contract/load-target.ts';
import { createServiceClient } from '../../src/api/index.ts';
import { parseConfig } from '../../src/config.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { runActivity, testLog } from './harness.ts';

const STALLED = 'no progress within CRS_STALL_TIMEOUT_MS';

describe('progress heartbeats', () => {
  it('when the details repeat, then no beat is due; when they change, one is', () => {
    const b = createProgressBeat({ stallMs: 1000, now: () => 0 });
    expect(b.moved({ linesCommitted: 1 })).toBe(true);
    expect(b.moved({ linesCommitted: 1 })).toBe(false);
    expect(b.moved({ linesCommitted: 2 })).toBe(true);
  });

  it('when the work has not moved for the stall window, then keep-alive beats stop until it moves again', () => {
    let t = 0;
    const b = createProgressBeat({ stallMs: 1000, now: () => t });
    b.moved({ n: 1 });
    t = 999;
    expect(b.alive()).toBe(true);
    expect(b.moved({ n: 1 })).toBe(false); // the same details are no movement
    t = 1000;
    expect(b.alive()).toBe(false);
    expect(b.quietMs()).toBe(1000);
    expect(b.moved({ n: 2 })).toBe(true);
    expect(b.alive()).toBe(true);
  });
});

/**
 * An activity environment whose worker log is kept, as the worker would write it. `onStall` runs
 * when the log says the work stopped moving, with the beats sent so far.
 */
function environment(heartbeatTimeoutMs: number, onStall: (beatsSoFar: number) => void = () => {}) {
  const logs: LogEntry[] = [];
  const beats: unknown[] = [];
  const env = new MockActivityEnvironment(
    { heartbeatTimeoutMs },
    {
      logger: new DefaultLogger('WARN', (e) => {
        logs.push(e);
        if (e.message.includes(STALLED)) onStall(beats.length);
      }),
    },
  );
  env.on('heartbeat', (d: unknown) => beats.push(d));
  const stalled = () => logs.some((l) => l.message.includes(STALLED));
  return { env, beats, logs, stalled };
}

const tick = () => new Promise((r) => setTimeout(r, 20));

// The heartbeat both long activities (the day load, the enrichment batch) beat through.
describe('the heartbeat of a long activity', () => {
  const p1 = { linesCommitted: 100, rowsRead: 100, bytesRead: 1000 };
  const p2 = { linesCommitted: 200, rowsRead: 200, bytesRead: 2000 };

  it('when the work reports the same progress again, then only changes are heartbeated', async () => {
    const { env, beats } = environment(60_000);
    await env.run(async () => {
      const h = createHeartbeat(0);
      await h.around(async () => {
        for (const p of [p1, p1, p2, p2]) h.progress(p);
      });
    });
    expect(beats).toEqual([p1, p2]);
  });

  it('when a retried attempt starts from its checkpoint, then the checkpoint is not beaten again, only what moves on from it', async () => {
    const { env, beats } = environment(60_000);
    await env.run(async () => {
      const h = createHeartbeat(0, p1);
      await h.around(async () => {
        for (const p of [p1, p2]) h.progress(p);
      });
    });
    expect(beats).toEqual([p2]);
  });

  it('when the work stops moving beyond the stall window, then its heartbeats stop and the worker log says why', async () => {
    const { env, beats, stalled } = environment(600);
    await env.run(async () => {
      const h = createHeartbeat(0);
      await h.around(async () => {
        h.progress(p1);
        // Hung: the keep-alive timer (every 200 ms here) runs and finds no movement.
        while (!stalled()) await tick();
      });
    });
    expect(beats).toEqual([p1]);
  });

  it('when the work moved within the stall window, then the keep-alive timer beats its last progress', async () => {
    const { env, beats } = environment(600);
    await env.run(async () => {
      const h = createHeartbeat(3_600_000);
      await h.around(async () => {
        h.progress(p1);
        // A quiet stretch of healthy work (a finalize): alive, beating, with nothing new.
        while (beats.length < 3) await tick();
      });
    });
    expect(beats.slice(0, 3)).toEqual([p1, p1, p1]);
  });
});

/**
 * The beats after each time the log said the work stopped moving: the first of them must be new
 * progress, never the stalled details again (a beat on the timer while stalled would repeat them).
 */
function beatsAfterStalls(beats: unknown[], marks: number[]): { before: unknown; after: unknown }[] {
  return marks
    .filter((m) => m > 0 && m < beats.length)
    .map((m) => ({ before: beats[m - 1], after: beats[m] }));
}

// The real activities, the real loader and enrichment, the simulator over HTTP made slow.
describe('load and enrichment activities heartbeat on progress (simulator, Postgres)', () => {
  let tw: TestWarehouse;
  let sim: Simulator;
  let day: string;

  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'tbeat' });
    sim = await startSimulator({ seed: 11, days: 4, recordsPerDay: 300, now: runningClock(PINNED) });
    const days = sim.truth.days();
    day = days[days.length - 3]!;
  });

  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
  });

  /** The worker's activities with a stall window of 500 ms (the heartbeat ticks every 200 ms here). */
  function activities() {
    const config = parseConfig({
      ...sim.env(),
      CRS_SCHEMA: tw.schema,
      CRS_STALL_TIMEOUT_MS: '500',
      CRS_BATCH_SIZE: '20',
      CRS_LOAD_PARTITIONS: '2',
      CRS_RATE_LIMIT_RPS: '1000',
    });
    const client = createServiceClient({ ...config.api, concurrency: 2 }, testLog);
    return createActivities({ warehouse: tw.w, client, config, log: testLog });
  }

  it("when a day's export stalls beyond the stall window, then the load's heartbeats stop, the worker log says why, and the load completes once the service goes on", async () => {
    // Every export body stops part-way for 3 s, then drops; the stall is switched off once seen,
    // so the loader's reopen reads the export whole.
    sim.setFaults('stall=1:3s');
    const marks: number[] = [];
    const { env, beats, stalled } = environment(600, (n) => {
      marks.push(n);
      sim.setFaults('');
    });
    const counts = await runActivity(env, activities().loadExportDay, {
      target: closedDayLoad('beat-load', day),
    });
    expect(stalled()).toBe(true);
    expect(counts.rowsRead).toBe(sim.truth.exportDay(day).length);
    const after = beatsAfterStalls(beats, marks);
    expect(after.length).toBeGreaterThan(0);
    for (const a of after) expect(a.after).not.toEqual(a.before);
    // The last beat is the day's whole checkpoint.
    expect(beats.at(-1)).toMatchObject({ linesCommitted: counts.linesRead });
  });

  it('when an enrichment batch stops moving (the thread API answers slowly), then its heartbeats stop too', async () => {
    const a = activities();
    sim.setFaults('');
    await runActivity(new MockActivityEnvironment(), a.loadExportDay, {
      target: closedDayLoad('beat-enrich', day),
    });
    const ids = await runActivity(new MockActivityEnvironment(), a.listPendingThreads, {
      afterThreadId: null,
      limit: 2,
    });
    expect(ids.length).toBe(2);
    // Each answer of the thread API takes 1.5 s, three stall windows; fast again once seen.
    sim.setFaults('latency=1500ms');
    const marks: number[] = [];
    const { env, beats, stalled } = environment(600, (n) => {
      marks.push(n);
      sim.setFaults('');
    });
    const counts = await runActivity(env, a.enrichThreads, { threadIds: ids, runId: 'beat-enrich' });
    expect(stalled()).toBe(true);
    expect(counts).toMatchObject({ threads: 2, done: 2 });
    for (const x of beatsAfterStalls(beats, marks)) expect(x.after).not.toEqual(x.before);
    expect(beats.at(-1)).toMatchObject({ done: 2 });
  });
});
