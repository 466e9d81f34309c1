import { WorkflowFailedError } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dayWorkflowId } from '../../contract/workflows.ts';
import { backfill, syncWindow } from '../../workflows/index.ts';
import { progressQuery } from '../../workflows/queries.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { randomDays, until } from './days.ts';
import { fakeDayLoads } from './fake-activities.ts';
import { connectHarness, createTestWorker, type TemporalHarness } from './harness.ts';

// Workflow structure against a real dev server and Postgres, with the day load replaced by a
// stand-in activity (fake-activities.ts) that keeps the ledger like the loader does.
describe('workflows (real Temporal dev server, stand-in loader)', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let worker: Worker;
  let running: Promise<void>;
  let fake: ReturnType<typeof fakeDayLoads>;

  beforeAll(async () => {
    h = await connectHarness('workflows');
    tw = await createTestWarehouse({ prefix: 'twf' });
    fake = fakeDayLoads(tw.w, { delayMs: 1500, failDays: [] });
    worker = await createTestWorker(h, {
      warehouse: tw.w,
      activities: fake.activities,
      env: { CRS_TEXT_RETENTION_DAYS: '400' },
    });
    running = worker.run();
  });

  afterAll(async () => {
    worker?.shutdown();
    await running;
    await tw?.dispose();
    await h?.close();
  });

  async function dayRow(day: string) {
    return tw.w.db.selectFrom('sync_days').selectAll().where('day', '=', day).executeTakeFirst();
  }

  it('when a window is synced, then each day loads once and the run is recorded with its totals', async () => {
    const days = randomDays(3);
    const result = await h.client.workflow.execute(syncWindow, {
      taskQueue: h.taskQueue,
      workflowId: `t-sync-${days[0]}`,
      args: [{ kind: 'manual', from: days[0], to: days[2], enrich: false, concurrency: 3 }],
    });
    expect(result.days).toBe(3);
    expect(result.totals.daysLoaded).toBe(3);
    expect(result.totals.rowsRead).toBe(300);
    for (const d of days) {
      expect(fake.starts.get(d)).toBe(1);
      expect((await dayRow(d))?.status).toBe('complete');
    }
    const run = await tw.w.db
      .selectFrom('sync_runs')
      .selectAll()
      .where('load_id', '=', result.runId)
      .executeTakeFirstOrThrow();
    expect(run).toMatchObject({ status: 'succeeded', kind: 'manual', rows_read: 300, rows_inserted: 300 });
    // What the Temporal UI shows as the run's current details.
    const meta = await h.client.workflow
      .getHandle(`t-sync-${days[0]}`)
      .query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(meta.currentDetails).toContain('days 3/3 (0 failed)');
    expect(meta.currentDetails).toContain('rows 300 read');
  });

  it('when the daily (scheduled) run ends, then it sweeps text past retention; a manual run does not', async () => {
    const oldRow = async (id: string) => {
      await tw.w.pool.query(
        `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input, response,
           extra, record_hash, _source_line, _load_id, response_chars)
         values ($1, $1, $1, '2020-01-02T03:04:05Z', '2020-01-02', 'old words', 'old answer', '{}', 'h', 1, 'x', 10)`,
        [id],
      );
    };
    const textOf = async (id: string) =>
      (
        await tw.w.pool.query(
          'select input, response, response_chars from analytics_messages where message_id = $1',
          [id],
        )
      ).rows[0];
    const days = randomDays(2);
    await oldRow('00000000-0000-4000-8000-00000000000a');
    await h.client.workflow.execute(syncWindow, {
      taskQueue: h.taskQueue,
      workflowId: `t-manual-keep-${days[0]}`,
      args: [{ kind: 'manual', from: days[0], to: days[0], enrich: false }],
    });
    expect(await textOf('00000000-0000-4000-8000-00000000000a')).toEqual({
      input: 'old words',
      response: 'old answer',
      response_chars: 10,
    });
    await h.client.workflow.execute(syncWindow, {
      taskQueue: h.taskQueue,
      workflowId: `t-daily-sweep-${days[1]}`,
      args: [{ kind: 'scheduled', from: days[1], to: days[1], enrich: false }],
    });
    expect(await textOf('00000000-0000-4000-8000-00000000000a')).toEqual({
      input: '',
      response: '',
      response_chars: 10,
    });
  });

  it('when a backfill reaches days another run is loading, then it attaches to them instead of loading them again', async () => {
    const days = randomDays(4);
    const first = await h.client.workflow.start(syncWindow, {
      taskQueue: h.taskQueue,
      workflowId: `t-overlap-sync-${days[0]}`,
      args: [{ kind: 'scheduled', from: days[1], to: days[2], enrich: false, concurrency: 2 }],
    });
    // Both of the first run's days are loading before the backfill starts.
    await until(async () => {
      const rows = await Promise.all([dayRow(days[1]!), dayRow(days[2]!)]);
      return rows.every((r) => r?.status === 'running');
    }, 'the first run to be loading its days');
    const second = await h.client.workflow.execute(backfill, {
      taskQueue: h.taskQueue,
      workflowId: `t-overlap-backfill-${days[0]}`,
      args: [{ from: days[0]!, to: days[3]!, concurrency: 4, enrich: false }],
    });
    const firstResult = await first.result();
    expect(firstResult.totals.daysLoaded).toBe(2);
    expect(second.totals.daysLoaded).toBe(2);
    expect(second.totals.daysAttached).toBe(2);
    for (const d of days) expect(fake.starts.get(d), d).toBe(1);
  });

  it('when a backfill is longer than its days per run, then it continues as new and loads every day once', async () => {
    const days = randomDays(5);
    const workflowId = `t-can-${days[0]}`;
    const handle = await h.client.workflow.start(backfill, {
      taskQueue: h.taskQueue,
      workflowId,
      args: [{ from: days[0]!, to: days[4]!, concurrency: 2, daysPerRun: 2, enrich: false }],
    });
    const result = await handle.result();
    expect(result.totals.daysLoaded).toBe(5);
    for (const d of days) expect(fake.starts.get(d)).toBe(1);
    // Two days per run make at least three runs (the server may suggest more: test/setup/temporal.ts).
    const progress = await h.client.workflow.getHandle(workflowId).query(progressQuery);
    expect(progress.runs).toBeGreaterThanOrEqual(3);
    const last = await h.client.workflow.getHandle(workflowId).describe();
    expect(last.runId).not.toBe(handle.firstExecutionRunId);
    const runs = await until(async () => {
      let n = 0;
      for await (const _ of h.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) n++;
      return n === progress.runs ? n : undefined;
    }, 'every run of the backfill in visibility');
    expect(runs).toBe(progress.runs);
  });

  it('when a sync is cancelled in the middle of a day, then the day is released back to pending and the run is recorded as cancelled', async () => {
    const days = randomDays(1);
    const slow = fakeDayLoads(tw.w, { delayMs: 60_000 });
    const h2 = { ...h, taskQueue: `${h.taskQueue}-slow` };
    const slowWorker = await createTestWorker(h2, { warehouse: tw.w, activities: slow.activities });
    await slowWorker.runUntil(async () => {
      const handle = await h.client.workflow.start(syncWindow, {
        taskQueue: h2.taskQueue,
        workflowId: `t-cancel-${days[0]}`,
        args: [{ kind: 'manual', from: days[0], to: days[0], enrich: false, heartbeatTimeout: '2s' }],
      });
      await until(async () => (await dayRow(days[0]!))?.status === 'running', 'the day to be loading');
      const p = await handle.query(progressQuery);
      expect(p).toMatchObject({ phase: 'loading', daysTotal: 1, daysRunning: [days[0]] });
      await handle.cancel();
      await expect(handle.result()).rejects.toBeInstanceOf(WorkflowFailedError);
      const day = await h.client.workflow.getHandle(dayWorkflowId(days[0]!)).describe();
      expect(day.status.name).toBe('CANCELLED');
    });
    const row = await dayRow(days[0]!);
    expect(row).toMatchObject({ status: 'pending', last_error: 'cancelled' });
    const run = await tw.w.db
      .selectFrom('sync_runs')
      .select(['status', 'error'])
      .where('workflow_id', '=', `t-cancel-${days[0]}`)
      .executeTakeFirstOrThrow();
    expect(run).toEqual({ status: 'cancelled', error: 'cancelled' });
  });

  it('when a backfill is cancelled while days load, then every day it started is released and the run is recorded as cancelled', async () => {
    const days = randomDays(6);
    const slow = fakeDayLoads(tw.w, { delayMs: 60_000 });
    const hq = { ...h, taskQueue: `${h.taskQueue}-bfcancel` };
    const w = await createTestWorker(hq, { warehouse: tw.w, activities: slow.activities });
    const workflowId = `t-bfcancel-${days[0]}`;
    await w.runUntil(async () => {
      const handle = await h.client.workflow.start(backfill, {
        taskQueue: hq.taskQueue,
        workflowId,
        args: [{ from: days[0]!, to: days[5]!, concurrency: 2, enrich: false, heartbeatTimeout: '2s' }],
      });
      await until(async () => {
        const rows = await Promise.all([dayRow(days[0]!), dayRow(days[1]!)]);
        return rows.every((r) => r?.status === 'running');
      }, 'two days to be loading');
      await handle.cancel();
      await expect(handle.result()).rejects.toBeInstanceOf(WorkflowFailedError);
    });
    expect((await dayRow(days[0]!))?.status).toBe('pending');
    expect((await dayRow(days[1]!))?.status).toBe('pending');
    // Days it never reached were never touched.
    expect(await dayRow(days[2]!)).toBeUndefined();
    const run = await tw.w.db
      .selectFrom('sync_runs')
      .select(['status', 'kind'])
      .where('workflow_id', '=', workflowId)
      .executeTakeFirstOrThrow();
    expect(run).toEqual({ status: 'cancelled', kind: 'backfill' });
  });

  it('when a day fails with an error no retry can fix, then it is tried once, the others load, and the run fails naming it', async () => {
    const days = randomDays(3);
    const failing = fakeDayLoads(tw.w, { failDays: [days[1]!] });
    const h3 = { ...h, taskQueue: `${h.taskQueue}-fail` };
    const w3 = await createTestWorker(h3, { warehouse: tw.w, activities: failing.activities });
    const err = await w3.runUntil(
      h.client.workflow
        .execute(syncWindow, {
          taskQueue: h3.taskQueue,
          workflowId: `t-fail-${days[0]}`,
          args: [{ kind: 'manual', from: days[0], to: days[2], enrich: false }],
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        ),
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect(String((err as WorkflowFailedError).cause?.message)).toContain(days[1]);
    expect(failing.starts.get(days[1]!)).toBe(1);
    expect((await dayRow(days[0]!))?.status).toBe('complete');
    expect((await dayRow(days[2]!))?.status).toBe('complete');
    const run = await tw.w.db
      .selectFrom('sync_runs')
      .select(['status', 'error'])
      .where('workflow_id', '=', `t-fail-${days[0]}`)
      .executeTakeFirstOrThrow();
    expect(run.status).toBe('failed');
    expect(run.error).toContain(days[1]);
  });
});
