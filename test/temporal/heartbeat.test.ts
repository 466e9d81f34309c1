import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger, type LogEntry } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.ts';
import type { SyncOps } from '../../activities/ops.ts';
import { createProgressBeat } from '../../activities/progress-beat.ts';
import { createServiceClient } from '../../src/api/index.ts';
import { parseConfig } from '../../src/config.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { testLog } from './harness.ts';

const SUMMARY = {
  linesRead: 3,
  bytesRead: 30,
  rowsRead: 3,
  inserted: 3,
  updated: 0,
  unchanged: 0,
  rejected: 0,
  deleted: 0,
  threadsQueued: 0,
};

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

describe('load and enrichment activities heartbeat on progress', () => {
  let tw: TestWarehouse;

  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'tbeat' });
  });

  afterAll(async () => {
    await tw?.dispose();
  });

  function activities(ops: Partial<SyncOps>, stallMs: number) {
    const config = parseConfig({ CRS_SCHEMA: tw.schema, CRS_STALL_TIMEOUT_MS: String(stallMs) });
    const client = createServiceClient({ ...config.api, concurrency: 1 }, testLog);
    return createActivities({ warehouse: tw.w, client, config, log: testLog, ops });
  }

  /** An activity environment whose worker log is kept, as the worker would write it. */
  function environment(heartbeatTimeoutMs: number) {
    const logs: LogEntry[] = [];
    const env = new MockActivityEnvironment(
      { heartbeatTimeoutMs },
      { logger: new DefaultLogger('WARN', (e) => logs.push(e)) },
    );
    const beats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => beats.push(d));
    return { env, beats, logs };
  }

  it('when a load reports the same progress again, then only changes are heartbeated', async () => {
    const p1 = { linesCommitted: 100, rowsRead: 100, bytesRead: 1000 };
    const p2 = { linesCommitted: 200, rowsRead: 200, bytesRead: 2000 };
    const a = activities(
      {
        async loadDay({ target: { day, runId: loadId }, onProgress }) {
          onProgress(p1);
          onProgress(p1);
          onProgress(p2);
          onProgress(p2);
          return { day, runId: loadId, ...SUMMARY };
        },
      },
      0,
    );
    const { env, beats } = environment(60_000);
    await env.run(a.loadExportDay, { day: '2026-01-02', loadId: 'l' });
    expect(beats).toEqual([p1, p2]);
  });

  it('when a load stops moving beyond the stall window, then its heartbeats stop and the worker log says why', async () => {
    const p1 = { linesCommitted: 100, rowsRead: 100, bytesRead: 1000 };
    const { env, beats, logs } = environment(600);
    const stalled = () => logs.some((l) => l.message.includes('no progress within CRS_STALL_TIMEOUT_MS'));
    const a = activities(
      {
        async loadDay({ target: { day, runId: loadId }, onProgress }) {
          onProgress(p1);
          // Hung: the keep-alive timer (every 200 ms here) runs and finds no movement.
          while (!stalled()) await new Promise((r) => setTimeout(r, 20));
          return { day, runId: loadId, ...SUMMARY };
        },
      },
      0,
    );
    await env.run(a.loadExportDay, { day: '2026-01-02', loadId: 'l' });
    expect(beats).toEqual([p1]);
  });

  it('when a load moved within the stall window, then the keep-alive timer beats its last progress', async () => {
    const p1 = { linesCommitted: 100, rowsRead: 100, bytesRead: 1000 };
    const { env, beats } = environment(600);
    const a = activities(
      {
        async loadDay({ target: { day, runId: loadId }, onProgress }) {
          onProgress(p1);
          // A quiet stretch of healthy work (a finalize): alive, beating, with nothing new.
          while (beats.length < 3) await new Promise((r) => setTimeout(r, 20));
          return { day, runId: loadId, ...SUMMARY };
        },
      },
      3_600_000,
    );
    await env.run(a.loadExportDay, { day: '2026-01-02', loadId: 'l' });
    expect(beats.slice(0, 3)).toEqual([p1, p1, p1]);
  });

  it('when an enrichment batch stops moving, then its heartbeats stop too', async () => {
    const counts = { threads: 1, done: 1, deleted: 0, forbidden: 0, failed: 0, messages: 4, artifacts: 0 };
    const { env, beats, logs } = environment(600);
    const stalled = () => logs.some((l) => l.message.includes('no progress within CRS_STALL_TIMEOUT_MS'));
    const a = activities(
      {
        async enrichThreads({ onProgress }) {
          onProgress?.(counts);
          onProgress?.(counts);
          while (!stalled()) await new Promise((r) => setTimeout(r, 20));
          return counts;
        },
      },
      0,
    );
    await env.run(a.enrichThreads, { threadIds: ['t1'], loadId: 'l' });
    expect(beats).toEqual([counts]);
  });
});
