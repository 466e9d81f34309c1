import { ScheduleOverlapPolicy } from '@temporalio/client';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAY_WORKFLOW_PREFIX } from '../../contract/workflows.ts';
import { shiftDay, utcDay } from '../../src/common/civil-date.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { createOrUpdateSchedule, describeSchedule } from '../../src/temporal/schedules.ts';
import { forget } from '../../src/warehouse/privacy/forget.ts';
import { backfill, syncIntraday } from '../../workflows/index.ts';
import { progressQuery } from '../../workflows/queries.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { until } from './days.ts';
import {
  connectHarness,
  createTestWorker,
  quietLogger,
  type TemporalHarness,
  workflowBundle,
} from './harness.ts';
import { expectedRows, warehouseRows } from './truth.ts';

// The real activities (loader, ledger, enrichment) against real Postgres, the simulator over
// HTTP and the dev server, in a namespace of this file's own.
describe('sync through Temporal with the real activities (simulator, Postgres, dev server)', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator;
  const frozen = new Date();
  const today = utcDay(new Date());
  const days = [5, 4, 3, 2, 1].map((n) => shiftDay(today, -n));
  const histories: { workflowId: string; history: unknown; json: string }[] = [];

  beforeAll(async () => {
    h = await connectHarness('integration');
    tw = await createTestWarehouse({ prefix: 'tint' });
    sim = await startSimulator({
      port: 0,
      // A stopped clock: no record arrives late and no thread is deleted while the test compares.
      now: () => frozen,
      seed: 7,
      days: 8,
      recordsPerDay: 1500,
      faults: 'latency=150ms',
    });
  });

  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
    await h?.close();
  });

  it('when the schedule fires while an overlapping backfill runs, then no day is loaded twice and the warehouse equals the export', async () => {
    const scheduleId = `crs-sync-daily-${h.taskQueue}`;
    // A ledger whose watermark is the first day, so the scheduled window (watermark − 3 days of
    // lookback … yesterday) covers every day the backfill covers too.
    await tw.w.db
      .insertInto('sync_days')
      .values({ day: shiftDay(days[0]!, -1), status: 'complete' })
      .execute();
    // Both runs are waiting on the task queue before any worker picks them up, so they race for
    // the same days from the first workflow task on.
    const bf = await h.client.workflow.start(backfill, {
      taskQueue: h.taskQueue,
      workflowId: `backfill-${days[0]}-${days[4]}`,
      args: [{ from: days[0]!, to: days[4]!, concurrency: 5, enrich: false }],
    });
    await createOrUpdateSchedule(h.client, { taskQueue: h.taskQueue, enrich: false, id: scheduleId });
    await h.client.schedule.getHandle(scheduleId).trigger(ScheduleOverlapPolicy.BUFFER_ONE);
    const scheduled = await until(async () => {
      const d = await describeSchedule(h.client, scheduleId);
      return d.info.runningActions[0]?.workflow.workflowId;
    }, 'the scheduled run to start');

    const worker = await createTestWorker(h, {
      warehouse: tw.w,
      env: { ...sim.env(), CRS_LOOKBACK_DAYS: '7' },
    });
    const [bfResult, schedResult] = await worker.runUntil(
      Promise.all([bf.result(), h.client.workflow.getHandle(scheduled).result()]),
    );
    await h.client.schedule.getHandle(scheduleId).delete();

    // The scheduled window contains the backfill's days: each shared day was loaded by one run
    // and taken over ("attached") by the other, and every day was loaded once in all.
    const planned = schedResult.days;
    expect(planned).toBeGreaterThanOrEqual(5);
    expect(bfResult.totals.daysLoaded + bfResult.totals.daysAttached).toBe(5);
    expect(bfResult.totals.daysAttached + schedResult.totals.daysAttached).toBe(5);
    expect(bfResult.totals.daysLoaded + schedResult.totals.daysLoaded).toBe(planned);
    for (const d of days) {
      const executions: string[] = [];
      for await (const e of h.client.workflow.list({ query: `WorkflowId = '${DAY_WORKFLOW_PREFIX}${d}'` })) {
        executions.push(e.runId);
      }
      expect(executions, `executions of ${d}`).toHaveLength(1);
    }
    const ledger = await tw.w.db
      .selectFrom('sync_days')
      .select(['day', 'status', 'attempts'])
      .where('day', 'in', days)
      .orderBy('day')
      .execute();
    expect(ledger).toEqual(days.map((day) => ({ day, status: 'complete', attempts: 1 })));
    expect(await warehouseRows(tw.w, days)).toEqual(expectedRows(sim, days));

    for (const id of [bf.workflowId, scheduled, ...days.map((d) => `${DAY_WORKFLOW_PREFIX}${d}`)]) {
      const history = await h.client.workflow.getHandle(id).fetchHistory();
      // Payload bytes as base64, the way the Temporal CLI and UI export a history.
      const json = JSON.stringify(history, (_k, v) =>
        v instanceof Uint8Array ? Buffer.from(v).toString('base64') : v,
      );
      histories.push({ workflowId: id, history, json });
    }
  });

  it('when the history of a backfill grows past the continue-as-new threshold of the server, then it continues as new and still loads every day', async () => {
    const range = [7, 6, 5, 4, 3, 2].map((n) => shiftDay(today, -n));
    const workflowId = `backfill-can-${range[0]}`;
    const worker = await createTestWorker(h, { warehouse: tw.w, env: sim.env() });
    const [result, progress] = await worker.runUntil(async () => {
      const r = await h.client.workflow.execute(backfill, {
        taskQueue: h.taskQueue,
        workflowId,
        // One day at a time and no days-per-run limit of its own: only the server's suggestion
        // (SUGGEST_CONTINUE_AS_NEW_AFTER events, test/setup/temporal.ts) makes it continue as new.
        args: [{ from: range[0]!, to: range[5]!, concurrency: 1, enrich: false }],
      });
      // The last run answers the query while the worker is still up.
      return [r, await h.client.workflow.getHandle(workflowId).query(progressQuery)] as const;
    });
    expect(result.totals.daysLoaded + result.totals.daysAttached).toBe(6);
    expect(progress.runs).toBeGreaterThanOrEqual(2);
    expect(await warehouseRows(tw.w, range)).toEqual(expectedRows(sim, range));
  });

  // Enrichment after an erasure: test/privacy/forget.test.ts (a page in flight, and one after).
  it('when a user and a thread are forgotten, then a backfill and an intraday pull of their days bring nothing of them back', {
    timeout: 120_000,
  }, async () => {
    const rows = await tw.w.pool.query<{ user_id: string; thread_id: string }>(
      `select user_id::text, thread_id::text from analytics_messages where message_date = $1 order by message_id limit 2`,
      [days[2]],
    );
    const user = rows.rows[0]!.user_id;
    const thread = rows.rows.find((r) => r.user_id !== user)?.thread_id ?? rows.rows[1]!.thread_id;
    const erased = await forget(tw.w.pool, { users: [user], threads: [thread] }, { reason: 'integration' });
    expect(erased.rows.analytics_messages).toBeGreaterThan(0);
    const worker = await createTestWorker(h, { warehouse: tw.w, env: sim.env() });
    const [again] = await worker.runUntil(async () => {
      const b = await h.client.workflow.execute(backfill, {
        taskQueue: h.taskQueue,
        workflowId: `backfill-after-forget-${days[0]}`,
        args: [{ from: days[1]!, to: days[3]!, concurrency: 2, enrich: false }],
      });
      const i = await h.client.workflow.execute(syncIntraday, {
        taskQueue: h.taskQueue,
        workflowId: `intraday-after-forget-${days[0]}`,
        args: [{ enrich: false, now: frozen.toISOString() }],
      });
      expect(i.totals.daysFailed).toBe(0);
      return [b, i] as const;
    });
    expect(again.totals.suppressed).toBeGreaterThan(0);
    for (const id of [user, thread]) {
      const left = await tw.w.pool.query<{ t: string; n: number }>(
        `select table_schema || '.' || table_name as t from information_schema.tables
          where table_schema in ($1::text, $1::text || '_internal') and table_type = 'BASE TABLE'`,
        [tw.schema],
      );
      for (const { t } of left.rows) {
        const n = await tw.w.pool.query<{ n: number }>(
          `select count(*)::int as n from ${t} x where strpos(lower(x::text), $1) > 0`,
          [id],
        );
        expect(n.rows[0]!.n, `${t} holds ${id === user ? 'the user' : 'the thread'}`).toBe(0);
      }
    }
  });

  it('when the histories of those runs are read, then no credential and no row data is in them', async () => {
    expect(histories.length).toBeGreaterThan(5);
    const c = sim.credentials;
    const secrets = [c.serviceAccountToken, c.accessToken, c.clientSecret, c.apiKey];
    const sample = sim.truth.exportDay(days[2]!).slice(0, 20);
    for (const { workflowId, json } of histories) {
      // Payloads are base64 JSON inside the history; decode every payload's data as well.
      const decoded = [...json.matchAll(/"data":"([A-Za-z0-9+/=]+)"/g)]
        .map((m) => Buffer.from(m[1]!, 'base64').toString('utf8'))
        .join('\n');
      for (const s of secrets) {
        expect(json.includes(s), `${workflowId} raw`).toBe(false);
        expect(decoded.includes(s), `${workflowId} payloads`).toBe(false);
      }
      for (const r of sample) {
        expect(decoded.includes(r['Message ID']), `${workflowId} message id`).toBe(false);
        expect(decoded.includes(r.Input), `${workflowId} input text`).toBe(false);
      }
    }
  });

  it('when the recorded histories are replayed against the workflow code, then they replay without non-determinism', async () => {
    const bundle = await workflowBundle();
    expect(histories.length).toBeGreaterThan(5);
    for (const { workflowId, history } of histories) {
      await Worker.runReplayHistory({ workflowBundle: bundle }, history, workflowId);
    }
  });

  it('when a day history is replayed against workflow code that changed its steps, then non-determinism is detected', async () => {
    const changed = await bundleWorkflowCode({
      workflowsPath: new URL('./fixtures/changed-workflows.ts', import.meta.url).pathname,
      logger: quietLogger,
    });
    const day = histories.find((x) => x.workflowId.startsWith(DAY_WORKFLOW_PREFIX));
    expect(day).toBeDefined();
    await expect(
      Worker.runReplayHistory({ workflowBundle: changed }, day!.history, day!.workflowId),
    ).rejects.toBeInstanceOf(DeterminismViolationError);
  });
});
