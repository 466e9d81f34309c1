import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toFailure } from '../../activities/failures.ts';
import { createActivities } from '../../activities/index.ts';
import type { SyncOps } from '../../activities/ops.ts';
import { ACTIVITY_NAMES } from '../../contract/activities.ts';
import { createServiceClient } from '../../src/api/index.ts';
import { parseConfig } from '../../src/config.ts';
import { CrsError } from '../../src/errors.ts';
import { pipelineMetricsText } from '../../src/metrics/pipeline.ts';
import { markDayRunning } from '../../src/warehouse/ledger.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { testLog } from './harness.ts';

describe('activities', () => {
  let tw: TestWarehouse;

  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'tact' });
  });

  afterAll(async () => {
    await tw?.dispose();
  });

  function activities(ops: Partial<SyncOps>, maxDayLoads?: number) {
    const config = parseConfig({ CRS_SCHEMA: tw.schema });
    const client = createServiceClient({ ...config.api, concurrency: 1 }, testLog);
    return createActivities({
      warehouse: tw.w,
      client,
      config,
      log: testLog,
      ops,
      ...(maxDayLoads ? { maxDayLoads } : {}),
    });
  }

  it('when the worker builds its activities, then they are exactly the activities the contract names', () => {
    // The names are the activity types in recorded histories: one the contract lacks, or one it
    // names that the worker lacks, fails a running workflow.
    expect(Object.keys(activities({})).sort()).toEqual([...ACTIVITY_NAMES].sort());
  });

  it('when a day load is retried, then it passes the same load id on and heartbeats the committed-line checkpoint', async () => {
    const seen: { loadId: string }[] = [];
    const a = activities({
      async loadDay({ target: { day, runId: loadId }, onProgress }) {
        seen.push({ loadId });
        onProgress({ linesCommitted: 700, rowsRead: 700, bytesRead: 70_000 });
        return {
          day,
          runId: loadId,
          linesRead: 1000,
          bytesRead: 100_000,
          rowsRead: 1000,
          inserted: 300,
          updated: 0,
          unchanged: 700,
          rejected: 0,
          deleted: 0,
          threadsQueued: 4,
        };
      },
    });
    const env = new MockActivityEnvironment({
      attempt: 3,
      heartbeatDetails: { linesCommitted: 500, rowsRead: 500, bytesRead: 50_000 },
    });
    const beats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => beats.push(d));
    const counts = await env.run(a.loadExportDay, { day: '2026-01-02', loadId: 'load-1' });
    expect(seen).toEqual([{ loadId: 'load-1' }]);
    expect(beats).toContainEqual({ linesCommitted: 700, rowsRead: 700, bytesRead: 70_000 });
    expect(counts).toEqual({
      linesRead: 1000,
      bytesRead: 100_000,
      rowsRead: 1000,
      inserted: 300,
      updated: 0,
      unchanged: 700,
      rejected: 0,
      deleted: 0,
      threadsQueued: 4,
    });
  });

  it('when an enrichment batch stores pages, then its heartbeats carry the counts so far', async () => {
    const progress = { threads: 2, done: 1, deleted: 0, forbidden: 0, failed: 0, messages: 12, artifacts: 3 };
    const a = activities({
      async enrichThreads({ onProgress }) {
        onProgress?.(progress);
        return { ...progress, threads: 3, done: 3 };
      },
    });
    const env = new MockActivityEnvironment();
    const beats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => beats.push(d));
    const counts = await env.run(a.enrichThreads, { threadIds: ['t1', 't2', 't3'], loadId: 'load-1' });
    expect(beats).toContainEqual(progress);
    expect(counts).toMatchObject({ threads: 3, done: 3, messages: 12 });
  });

  it('when more day loads arrive than the worker has slots, then the extra one waits, heartbeating, and runs after', async () => {
    let releaseFirst: () => void = () => {};
    const order: string[] = [];
    const result = {
      runId: 'l',
      linesRead: 1,
      bytesRead: 1,
      rowsRead: 1,
      inserted: 1,
      updated: 0,
      unchanged: 0,
      rejected: 0,
      deleted: 0,
      threadsQueued: 0,
    };
    const a = activities(
      {
        async loadDay({ target: { day } }) {
          order.push(`start ${day}`);
          if (day === '2026-01-01') await new Promise<void>((r) => (releaseFirst = r));
          order.push(`end ${day}`);
          return { day, ...result };
        },
      },
      1,
    );
    const second = new MockActivityEnvironment({ heartbeatTimeoutMs: 900 });
    const beats: unknown[] = [];
    second.on('heartbeat', (d: unknown) => beats.push(d));
    const p1 = new MockActivityEnvironment().run(a.loadExportDay, { day: '2026-01-01', loadId: 'l' });
    const p2 = second.run(a.loadExportDay, { day: '2026-01-02', loadId: 'l' });
    // The second load beats (every 300 ms here) while it waits for the slot.
    while (beats.length < 2) await new Promise((r) => setTimeout(r, 50));
    expect(order).toEqual(['start 2026-01-01']);
    releaseFirst();
    await Promise.all([p1, p2]);
    expect(order).toEqual(['start 2026-01-01', 'end 2026-01-01', 'start 2026-01-02', 'end 2026-01-02']);
  });

  it('when the loader reports bad credentials, then the activity fails without retry under the error code', async () => {
    const a = activities({
      async loadDay() {
        throw new CrsError('HTTP_UNAUTHORIZED', 'export failed: HTTP 401 Unauthorized');
      },
    });
    const err = await new MockActivityEnvironment()
      .run(a.loadExportDay, { day: '2026-01-02', loadId: 'x' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: 'HTTP_UNAUTHORIZED', nonRetryable: true });
  });

  it('when the service throttles with a Retry-After, then the next retry waits that long', () => {
    const f = toFailure(
      new CrsError('HTTP_THROTTLED', 'export failed: HTTP 429', {
        retryable: true,
        details: { retryAfterMs: 7000 },
      }),
    );
    expect(f).toMatchObject({ type: 'HTTP_THROTTLED', nonRetryable: false, nextRetryDelay: 7000 });
  });

  it('when a transient error carries a credential in its text, then the failure message masks it', () => {
    const f = toFailure(new Error('connect failed: Authorization: Bearer abc.def.ghi'));
    expect(f.message).not.toContain('abc.def.ghi');
    expect(f).toMatchObject({ nonRetryable: false });
  });

  describe('a day load attempt that fails', () => {
    /** A loader that marks the day running (as the real one does) and then fails with `err`. */
    const failing = (err: Error) =>
      activities({
        async loadDay({ target: { day, runId: loadId }, attempt }) {
          await markDayRunning(tw.w.db, day, loadId, attempt);
          throw err;
        },
      });
    const row = (day: string) =>
      tw.w.db.selectFrom('sync_days').selectAll().where('day', '=', day).executeTakeFirstOrThrow();
    const failedLoads = async () =>
      Number(/^crs_sync_day_loads_total\{outcome="failed"\} (\d+)$/m.exec(await pipelineMetricsText())?.[1]);
    const outage = () =>
      new CrsError('HTTP_NETWORK', 'exportMessages failed: network error (ECONNREFUSED)', {
        retryable: true,
      });

    it('when attempt 4 of 12 fails retryably, then the day stays running with the error, attempt 4 of 12 and the next attempt 40 s on (the policy), and nothing counts as failed', async () => {
      const before = await failedLoads();
      const err = await new MockActivityEnvironment({ attempt: 4 })
        .run(failing(outage()).loadExportDay, { day: '2026-04-01', loadId: 'retry-1' })
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ type: 'HTTP_NETWORK', nonRetryable: false });
      const r = await row('2026-04-01');
      expect(r).toMatchObject({
        status: 'running',
        attempt: 4,
        max_attempts: 12,
        last_error: 'exportMessages failed: network error (ECONNREFUSED)',
        last_error_code: 'HTTP_NETWORK',
      });
      // 5 s × 2^(4 − 1) = 40 s, within the 5 min cap.
      expect(r.next_attempt_at!.getTime() - r.last_error_at!.getTime()).toBe(40_000);
      expect(await failedLoads()).toBe(before);

      // The next attempt starts: still running, the error kept until it loads.
      await markDayRunning(tw.w.db, '2026-04-01', 'retry-1', { number: 5, maxAttempts: 12 });
      expect(await row('2026-04-01')).toMatchObject({
        status: 'running',
        attempt: 5,
        last_error_code: 'HTTP_NETWORK',
        next_attempt_at: null,
      });
    });

    it('when the service asks to wait (Retry-After), then the next attempt is that far on', async () => {
      const throttled = new CrsError('HTTP_THROTTLED', 'export failed: HTTP 429', {
        retryable: true,
        details: { retryAfterMs: 90_000 },
      });
      await new MockActivityEnvironment({ attempt: 1 })
        .run(failing(throttled).loadExportDay, { day: '2026-04-02', loadId: 'retry-2' })
        .catch(() => {});
      const r = await row('2026-04-02');
      expect(r.status).toBe('running');
      expect(r.next_attempt_at!.getTime() - r.last_error_at!.getTime()).toBe(90_000);
    });

    it('when the last of the 12 attempts fails, then the day is failed with attempt 12 and counted once as a failed day', async () => {
      const before = await failedLoads();
      await new MockActivityEnvironment({ attempt: 12 })
        .run(failing(outage()).loadExportDay, { day: '2026-04-03', loadId: 'retry-3' })
        .catch(() => {});
      expect(await row('2026-04-03')).toMatchObject({
        status: 'failed',
        attempt: 12,
        max_attempts: 12,
        last_error_code: 'HTTP_NETWORK',
        next_attempt_at: null,
      });
      expect(await failedLoads()).toBe(before + 1);
      // The workflow's release after the last attempt finds the day released: not counted again.
      const a = activities({});
      expect(
        await new MockActivityEnvironment().run(a.releaseDay, {
          day: '2026-04-03',
          loadId: 'retry-3',
          reason: 'load failed after retries: network error',
        }),
      ).toBe(false);
      expect(await failedLoads()).toBe(before + 1);
    });

    it('when an intraday pull of the open day fails for good, then the day stays partial with the error and no day counts as failed', async () => {
      const before = await failedLoads();
      const denied = new CrsError('HTTP_UNAUTHORIZED', 'export failed: HTTP 401 Unauthorized');
      await new MockActivityEnvironment({ attempt: 1 })
        .run(failing(denied).loadExportDay, { day: '2026-04-04', loadId: 'pull-1', partial: true })
        .catch(() => {});
      expect(await row('2026-04-04')).toMatchObject({
        status: 'partial',
        attempt: 1,
        last_error_code: 'HTTP_UNAUTHORIZED',
        next_attempt_at: null,
      });
      expect(await failedLoads()).toBe(before);
    });
  });

  it('when a load ends short of success, then a day still running under its load id is released, and no other', async () => {
    await tw.w.db
      .insertInto('sync_days')
      .values([
        { day: '2026-03-01', status: 'running', _load_id: 'mine' },
        { day: '2026-03-02', status: 'running', _load_id: 'theirs' },
      ])
      .execute();
    const a = activities({});
    const env = new MockActivityEnvironment();
    expect(
      await env.run(a.releaseDay, { day: '2026-03-01', loadId: 'mine', reason: 'load failed after retries' }),
    ).toBe(true);
    expect(await env.run(a.releaseDay, { day: '2026-03-02', loadId: 'mine', reason: 'cancelled' })).toBe(
      false,
    );
    const rows = await tw.w.db
      .selectFrom('sync_days')
      .select(['day', 'status'])
      .where('day', 'in', ['2026-03-01', '2026-03-02'])
      .orderBy('day')
      .execute();
    expect(rows).toEqual([
      { day: '2026-03-01', status: 'failed' },
      { day: '2026-03-02', status: 'running' },
    ]);
  });
});
