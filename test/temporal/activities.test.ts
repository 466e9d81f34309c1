import { createServer } from 'node:net';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toFailure } from '../../activities/failures.ts';
import { createActivities } from '../../activities/index.ts';
import { createLiveness } from '../../activities/liveness.ts';
import { createLoadActivities, type DayLoadProgress } from '../../activities/load.ts';
import { createSemaphore } from '../../activities/semaphore.ts';
import { ACTIVITY_NAMES } from '../../contract/activities.ts';
import { type EnrichCounts, emptyTotals } from '../../contract/counts.ts';
import { closedDayLoad, loadIdOf, openDayLoad } from '../../contract/load-target.ts';
import { createServiceClient } from '../../src/api/index.ts';
import { parseConfig } from '../../src/config.ts';
import { CrsError } from '../../src/errors.ts';
import { pipelineMetricsText } from '../../src/metrics/pipeline.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { markDayRunning } from '../../src/warehouse/ledger.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { runActivity, testLog } from './harness.ts';
import { expectedRows, warehouseRows } from './truth.ts';

/**
 * The worker's activities as Temporal runs them (a mock activity environment: attempt number,
 * heartbeat details, heartbeats), on the real loader and enrichment, PostgreSQL and the simulator
 * over HTTP; a service that refuses, throttles or is away is the simulator so made, or a closed port.
 */
describe('activities', () => {
  let tw: TestWarehouse;
  let sim: Simulator;
  /** Days the simulator serves, one per test that loads one. */
  let days: string[];
  /** A port nothing listens on: the service away. */
  let closedPort: number;

  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'tact' });
    sim = await startSimulator({ seed: 23, days: 5, recordsPerDay: 300, now: runningClock(PINNED) });
    days = sim.truth.days().slice(0, 4);
    closedPort = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });
  });

  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
  });

  /**
   * The settings of a worker of this test: the simulator's, unless `env` says otherwise. The
   * service client gives up at once (`faults`: the simulator's faults for its requests only).
   */
  function deps(o: { env?: Record<string, string>; faults?: string } = {}) {
    const config = parseConfig({
      ...sim.env(),
      CRS_SCHEMA: tw.schema,
      CRS_BATCH_SIZE: '20',
      CRS_LOAD_PARTITIONS: '2',
      CRS_RATE_LIMIT_RPS: '1000',
      // Five reopens of a cut export 20 ms apart, doubling, not 7.75 s of pauses per attempt.
      CRS_SOURCE_REOPEN_PAUSE: '20ms',
      ...o.env,
    });
    const client = createServiceClient(
      {
        ...config.api,
        concurrency: 2,
        maxRetries: 0,
        maxRetryAfterMs: 50,
        ...(o.faults ? { extraHeaders: { 'x-sim-faults': o.faults } } : {}),
      },
      testLog,
    );
    return { warehouse: tw.w, client, config, log: testLog };
  }
  const activities = (o: Parameters<typeof deps>[0] = {}) => createActivities(deps(o));

  const row = (day: string) =>
    tw.w.db.selectFrom('sync_days').selectAll().where('day', '=', day).executeTakeFirstOrThrow();
  /** Where each key partition of a load has committed up to (its checkpoint). */
  const committed = async (loadKey: string) =>
    (
      await tw.w.db
        .selectFrom('load_checkpoints')
        .select(sql<number>`min(lines_committed)::int`.as('lines'))
        .where('load_key', '=', loadKey)
        .executeTakeFirst()
    )?.lines ?? 0;
  const heartbeats = (env: MockActivityEnvironment) => {
    const beats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => beats.push(d));
    return beats;
  };

  it('when the worker builds its activities, then they are exactly the activities the contract names', () => {
    // The names are the activity types in recorded histories: one the contract lacks, or one it
    // names that the worker lacks, fails a running workflow.
    expect(Object.keys(activities()).sort()).toEqual([...ACTIVITY_NAMES].sort());
  });

  it('when a day load is cut and retried, then the retry resumes the same load from its committed checkpoint, which its heartbeats carried, and the day ends whole', async () => {
    const day = days[0]!;
    const target = closedDayLoad('retry-run', day);
    // Attempt 1: every answer of the export is cut part-way; the loader reopens it and gives up.
    const env1 = new MockActivityEnvironment({ attempt: 1 });
    const beats1 = heartbeats(env1) as DayLoadProgress[];
    const err = await runActivity(env1, activities({ faults: 'cut=1' }).loadExportDay, { target }).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ type: 'STREAM_CUT', nonRetryable: false });
    expect(await row(day)).toMatchObject({ status: 'running', attempt: 1, last_error_code: 'STREAM_CUT' });
    const checkpoint = await committed(loadIdOf(target));
    expect(checkpoint).toBeGreaterThan(0);
    // Each beat is a checkpoint the partitions had committed (the last may trail the final one).
    expect(beats1.length).toBeGreaterThan(0);
    for (const b of beats1) expect(b.linesCommitted).toBeLessThanOrEqual(checkpoint);

    // Attempt 2, as Temporal starts it: the same input, the last beat as its heartbeat details.
    const env2 = new MockActivityEnvironment({ attempt: 2, heartbeatDetails: beats1.at(-1) });
    const beats2 = heartbeats(env2);
    const counts = await runActivity(env2, activities().loadExportDay, { target });
    const truth = expectedRows(sim, [day]);
    expect(await warehouseRows(tw.w, [day])).toEqual(truth);
    // One load over both attempts: the rows attempt 1 committed count as this load's inserts.
    expect(counts).toMatchObject({ rowsRead: truth.length, inserted: truth.length, unchanged: 0 });
    expect(await row(day)).toMatchObject({ status: 'complete', _load_id: 'retry-run', attempt: 2 });
    // Its beats go on from the checkpoint to the day's whole (rows and bytes: this attempt's reading).
    expect((beats2[0] as DayLoadProgress).linesCommitted).toBeGreaterThanOrEqual(checkpoint);
    expect(beats2.at(-1)).toMatchObject({ linesCommitted: counts.linesRead, bytesRead: counts.bytesRead });
  });

  it('when an enrichment batch stores pages, then its heartbeats carry the counts so far, the last being the batch', async () => {
    const a = activities();
    await runActivity(new MockActivityEnvironment(), a.loadExportDay, {
      target: closedDayLoad('enrich-run', days[1]!),
    });
    const ids = await runActivity(new MockActivityEnvironment(), a.listPendingThreads, {
      afterThreadId: null,
      limit: 3,
    });
    expect(ids.length).toBe(3);
    const env = new MockActivityEnvironment();
    const beats = heartbeats(env) as EnrichCounts[];
    const counts = await runActivity(env, a.enrichThreads, { threadIds: ids, runId: 'enrich-run' });
    expect(counts).toMatchObject({ threads: 3, done: 3 });
    const stored = await tw.w.db
      .selectFrom('thread_messages')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('thread_id', 'in', ids)
      .executeTakeFirstOrThrow();
    expect(counts.messages).toBe(stored.n);
    expect(beats.length).toBeGreaterThan(1);
    for (let i = 1; i < beats.length; i++) {
      expect(beats[i]!.done).toBeGreaterThanOrEqual(beats[i - 1]!.done);
      expect(beats[i]!.messages).toBeGreaterThanOrEqual(beats[i - 1]!.messages);
    }
    expect(beats.at(-1)).toEqual(counts);
  });

  it('when more day loads arrive than the worker has slots, then the extra one waits, heartbeating, and runs after', async () => {
    const day = days[2]!;
    const slots = createSemaphore(1);
    const load = createLoadActivities({ ...deps(), slots, alive: createLiveness(tw.w.db, testLog) });
    // Another load holds the worker's only slot.
    const release = await slots.acquire(new AbortController().signal);
    const env = new MockActivityEnvironment({ heartbeatTimeoutMs: 900 });
    const beats = heartbeats(env);
    const waiting = runActivity(env, load.loadExportDay, { target: closedDayLoad('slot-run', day) });
    // It beats (every 300 ms here) while it waits for the slot, and has not started the day.
    while (beats.length < 2) await new Promise((r) => setTimeout(r, 50));
    expect(
      await tw.w.db.selectFrom('sync_days').select('day').where('day', '=', day).executeTakeFirst(),
    ).toBeUndefined();
    release();
    const counts = await waiting;
    expect(counts.rowsRead).toBe(expectedRows(sim, [day]).length);
    expect((await row(day)).status).toBe('complete');
  });

  it('when the service refuses the credentials, then the activity fails without retry under the error code', async () => {
    const a = activities({ env: { CRS_SERVICE_ACCOUNT_TOKEN: 'not-a-token' } });
    const err = await runActivity(new MockActivityEnvironment(), a.loadExportDay, {
      target: closedDayLoad('denied-run', days[3]!),
    }).catch((e: unknown) => e);
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
    const failedLoads = async () =>
      Number(/^crs_sync_day_loads_total\{outcome="failed"\} (\d+)$/m.exec(await pipelineMetricsText())?.[1]);
    /** The service away: its address refuses connections. */
    const away = () => activities({ env: { CRS_BASE_URL: `http://127.0.0.1:${closedPort}` } });

    it('when attempt 4 of 12 fails retryably, then the day stays running with the error, attempt 4 of 12 and the next attempt 40 s on (the policy), and nothing counts as failed', async () => {
      const before = await failedLoads();
      const err = await runActivity(new MockActivityEnvironment({ attempt: 4 }), away().loadExportDay, {
        target: closedDayLoad('retry-1', '2026-04-01'),
      }).catch((e: unknown) => e);
      expect(err).toMatchObject({ type: 'HTTP_NETWORK', nonRetryable: false });
      const r = await row('2026-04-01');
      expect(r).toMatchObject({
        status: 'running',
        attempt: 4,
        max_attempts: 12,
        last_error_code: 'HTTP_NETWORK',
      });
      expect(r.last_error).toMatch(/^exportMessages failed: network error \(.*ECONNREFUSED.*\)$/);
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
      // Every request of this worker is answered 429 with Retry-After: 90.
      const a = activities({ faults: '429=1:90s' });
      const err = await runActivity(new MockActivityEnvironment({ attempt: 1 }), a.loadExportDay, {
        target: closedDayLoad('retry-2', '2026-04-02'),
      }).catch((e: unknown) => e);
      expect(err).toMatchObject({ type: 'HTTP_THROTTLED', nonRetryable: false, nextRetryDelay: 90_000 });
      const r = await row('2026-04-02');
      expect(r.status).toBe('running');
      expect(r.next_attempt_at!.getTime() - r.last_error_at!.getTime()).toBe(90_000);
    });

    it('when the last of the 12 attempts fails, then the day is failed with attempt 12 and counted once as a failed day', async () => {
      const before = await failedLoads();
      await runActivity(new MockActivityEnvironment({ attempt: 12 }), away().loadExportDay, {
        target: closedDayLoad('retry-3', '2026-04-03'),
      }).catch(() => {});
      expect(await row('2026-04-03')).toMatchObject({
        status: 'failed',
        attempt: 12,
        max_attempts: 12,
        last_error_code: 'HTTP_NETWORK',
        next_attempt_at: null,
      });
      expect(await failedLoads()).toBe(before + 1);
      // The workflow's release after the last attempt finds the day released: not counted again.
      expect(
        await runActivity(new MockActivityEnvironment(), activities().releaseDay, {
          target: closedDayLoad('retry-3', '2026-04-03'),
          reason: 'load failed after retries: network error',
        }),
      ).toBe(false);
      expect(await failedLoads()).toBe(before + 1);
    });

    it('when an intraday pull of the open day fails for good, then the day stays partial with the error and no day counts as failed', async () => {
      const before = await failedLoads();
      const a = activities({ env: { CRS_SERVICE_ACCOUNT_TOKEN: 'not-a-token' } });
      await runActivity(new MockActivityEnvironment({ attempt: 1 }), a.loadExportDay, {
        target: openDayLoad('pull-1', '2026-04-04'),
      }).catch(() => {});
      expect(await row('2026-04-04')).toMatchObject({
        status: 'partial',
        attempt: 1,
        last_error_code: 'HTTP_UNAUTHORIZED',
        next_attempt_at: null,
      });
      expect(await failedLoads()).toBe(before);
    });
  });

  it('when activity inputs recorded before the run id had its name arrive (loadId), then the activities read the run id from them', async () => {
    const a = activities();
    const env = new MockActivityEnvironment();
    // An activity task a workflow scheduled before an upgrade carries the recorded shape.
    await runActivity(env, a.beginRun, {
      loadId: 'recorded-run',
      kind: 'manual',
      from: null,
      to: null,
      workflowId: 'wf-recorded',
    });
    const ids = await runActivity(env, a.listPendingThreads, { afterThreadId: null, limit: 10 });
    const enriched = ids.slice(3, 4);
    expect(enriched.length).toBe(1);
    await runActivity(env, a.enrichThreads, { threadIds: enriched, loadId: 'recorded-run' });
    await runActivity(env, a.endRun, { loadId: 'recorded-run', status: 'succeeded', totals: emptyTotals() });
    expect(
      await tw.w.db
        .selectFrom('sync_runs')
        .select(['status', 'workflow_id'])
        .where('load_id', '=', 'recorded-run')
        .executeTakeFirstOrThrow(),
    ).toEqual({ status: 'succeeded', workflow_id: 'wf-recorded' });
    // The enrichment's rows name the run that enriched them.
    const byRun = await tw.w.db
      .selectFrom('thread_messages')
      .select('_load_id')
      .distinct()
      .where('thread_id', 'in', enriched)
      .execute();
    expect(byRun).toEqual([{ _load_id: 'recorded-run' }]);
  });

  it('when a load ends short of success, then a day still running under its run id is released, and no other', async () => {
    await tw.w.db
      .insertInto('sync_days')
      .values([
        { day: '2026-03-01', status: 'running', _load_id: 'mine' },
        { day: '2026-03-02', status: 'running', _load_id: 'theirs' },
      ])
      .execute();
    const a = activities();
    const env = new MockActivityEnvironment();
    expect(
      await runActivity(env, a.releaseDay, {
        day: '2026-03-01',
        loadId: 'mine',
        reason: 'load failed after retries',
      }),
    ).toBe(true);
    expect(
      await runActivity(env, a.releaseDay, { day: '2026-03-02', loadId: 'mine', reason: 'cancelled' }),
    ).toBe(false);
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
