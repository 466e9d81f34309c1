import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dayWorkflowId } from '../../contract/workflows.ts';
import { STALE_AFTER_MS } from '../../src/common/activity-timeouts.ts';
import { readStatus } from '../../src/warehouse/read/status.ts';
import { syncWindow } from '../../workflows/index.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { randomDays, until } from './days.ts';
import { fakeDayLoads } from './fake-activities.ts';
import { connectHarness, createTestWorker, type TemporalHarness } from './harness.ts';

// A run terminated while its worker was gone: nothing of it can close its ledger rows, so they
// read running until staleness shows them for what they are and the next run takes over.
describe('a terminated run whose worker is gone (real Temporal dev server, stand-in loader)', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;

  beforeAll(async () => {
    h = await connectHarness('liveness');
    tw = await createTestWarehouse({ prefix: 'tlive' });
  });

  afterAll(async () => {
    await tw?.dispose();
    await h?.close();
  });

  async function runWorker(
    delayMs: number,
  ): Promise<{ worker: Worker; done: Promise<void> } & ReturnType<typeof fakeDayLoads>> {
    const fake = fakeDayLoads(tw.w, { delayMs });
    const worker = await createTestWorker(h, { warehouse: tw.w, activities: fake.activities });
    return { worker, done: worker.run(), ...fake };
  }

  it('when a run is terminated mid-day with no worker left, then status shows its run and day abandoned, and the next run marks the run abandoned and takes the day over', async () => {
    const [day] = randomDays(1) as [string];
    // A day load that takes long: the worker is gone (and the run terminated) while it is running.
    const a = await runWorker(600_000);
    const first = await h.client.workflow.start(syncWindow, {
      taskQueue: h.taskQueue,
      workflowId: `t-abandon-${day}`,
      args: [{ kind: 'manual', from: day, to: day, enrich: false }],
    });
    const dead = await until(async () => {
      const r = await tw.w.db.selectFrom('sync_days').selectAll().where('day', '=', day).executeTakeFirst();
      return r?.status === 'running' ? r : undefined;
    }, 'the day to be loading');
    a.worker.shutdown();
    await a.done;
    await h.client.workflow.getHandle(dayWorkflowId(day)).terminate('test: gone');
    await first.terminate('test: gone');

    // Nothing closed the ledger: the run and the day still read running.
    const run = await tw.w.db
      .selectFrom('sync_runs')
      .selectAll()
      .where('load_id', '=', dead._load_id!)
      .executeTakeFirstOrThrow();
    expect(run.status).toBe('running');
    expect(
      (
        await tw.w.db
          .selectFrom('sync_days')
          .select('status')
          .where('day', '=', day)
          .executeTakeFirstOrThrow()
      ).status,
    ).toBe('running');

    // Time passes with no sign of life (as if the threshold had gone by).
    const ago = `${Math.ceil((STALE_AFTER_MS * 2) / 1000)} seconds`;
    await tw.w.pool.query('update sync_runs set progress_at = now() - $1::interval where load_id = $2', [
      ago,
      run.load_id,
    ]);
    await tw.w.pool.query('update sync_days set progress_at = now() - $1::interval where day = $2', [
      ago,
      day,
    ]);
    const s = await readStatus(tw.w.db);
    expect(s.recentRuns.find((r) => r.loadId === run.load_id)?.status).toBe('abandoned');
    expect(s.abandonedDays.map((d) => d.day)).toContain(day);

    // The next run, on a new worker.
    const b = await runWorker(100);
    try {
      const result = await h.client.workflow.execute(syncWindow, {
        taskQueue: h.taskQueue,
        workflowId: `t-abandon-next-${day}`,
        args: [{ kind: 'manual', from: day, to: day, enrich: false }],
      });
      expect(result.totals.daysLoaded).toBe(1);
      expect(b.starts.get(day)).toBe(1);
      const after = await tw.w.db
        .selectFrom('sync_days')
        .selectAll()
        .where('day', '=', day)
        .executeTakeFirstOrThrow();
      expect(after.status).toBe('complete');
      expect(after.attempts).toBe(dead.attempts + 1);
      expect(after.taken_over_from).toBe(run.load_id);
      const old = await tw.w.db
        .selectFrom('sync_runs')
        .selectAll()
        .where('load_id', '=', run.load_id)
        .executeTakeFirstOrThrow();
      expect(old.status).toBe('abandoned');
      expect(old.error).toContain(`marked abandoned by run ${result.runId}`);
      const status = await readStatus(tw.w.db);
      expect(status.abandonedDays).toEqual([]);
      expect(status.recentRuns.find((r) => r.loadId === result.runId)?.status).toBe('succeeded');
    } finally {
      b.worker.shutdown();
      await b.done;
    }
  });
});
