import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAY_WORKFLOW_PREFIX } from '../../contract/workflows.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { getWatermark } from '../../src/warehouse/ledger.ts';
import { readStatus } from '../../src/warehouse/read/status.ts';
import { syncIntraday, syncWindow } from '../../workflows/index.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { connectHarness, createTestWorker, type TemporalHarness } from './harness.ts';
import { expectedRows, warehouseRows } from './truth.ts';

// Intraday pulls of the open UTC day through the real activities, real Postgres, the simulator
// over HTTP and the dev server. The simulator's clock is moved by hand: it stands still while a
// pull reads and a test compares, and the day fills between pulls.
describe('intraday pulls of the open day (simulator, Postgres, dev server)', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator;
  let clock = Date.parse('2026-11-25T10:00:00Z');
  const at = (iso: string) => {
    clock = Date.parse(iso);
    return iso;
  };
  let runs = 0;

  const intraday = async (now: string) => {
    const worker = await createTestWorker(h, { warehouse: tw.w, env: sim.env() });
    return worker.runUntil(
      h.client.workflow.execute(syncIntraday, {
        taskQueue: h.taskQueue,
        workflowId: `intraday-${++runs}`,
        args: [{ enrich: false, now }],
      }),
    );
  };
  const dayRow = (day: string) =>
    tw.w.db
      .selectFrom('sync_days')
      .select(['status', 'finished_at', 'rows_deleted', 'export_complete'])
      .where('day', '=', day)
      .executeTakeFirstOrThrow();
  const liveOf = async (ids: string[]) =>
    (
      await tw.w.db
        .selectFrom('analytics_messages')
        .select('message_id')
        .where('message_id', 'in', ids)
        .where('_deleted_at', 'is', null)
        .execute()
    ).length;

  beforeAll(async () => {
    h = await connectHarness('intraday');
    tw = await createTestWarehouse({ prefix: 'tintra' });
    sim = await startSimulator({
      port: 0,
      now: () => new Date(clock),
      seed: 11,
      days: 3,
      recordsPerDay: 600,
    });
  });

  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
    await h?.close();
  });

  let goneIds: string[] = [];

  it('when the open day is pulled, more messages arrive and it is pulled again, then its rows are the export so far, and it is partial with its last pull time', async () => {
    await intraday(at('2026-11-25T10:00:00Z'));
    const first = expectedRows(sim, ['2026-11-25']);
    expect(first.length).toBeGreaterThan(0);
    expect(await warehouseRows(tw.w, ['2026-11-25'])).toEqual(first);
    const pulled = await dayRow('2026-11-25');
    expect(pulled.status).toBe('partial');
    expect(pulled.export_complete).toBe(false);

    await intraday(at('2026-11-25T16:00:00Z'));
    const later = expectedRows(sim, ['2026-11-25']);
    expect(later.length).toBeGreaterThan(first.length);
    // The export so far, plus the rows of threads deleted upstream since the first pull: a partial
    // day deletes nothing (the simulator deletes some threads hours after their last turn).
    const rows = await warehouseRows(tw.w, ['2026-11-25']);
    expect(rows.filter((r) => !sim.truth.isDeleted(r.thread_id))).toEqual(later);
    const firstIds = new Set(first.map((r) => r.message_id));
    for (const r of rows.filter((x) => sim.truth.isDeleted(x.thread_id))) {
      expect(firstIds.has(r.message_id), `kept ${r.message_id}`).toBe(true);
    }
    const again = await dayRow('2026-11-25');
    expect(again.status).toBe('partial');
    expect(again.finished_at!.getTime()).toBeGreaterThan(pulled.finished_at!.getTime());

    // The day before closed before these pulls: loaded complete, and the watermark stops there.
    expect((await dayRow('2026-11-24')).status).toBe('complete');
    expect(await getWatermark(tw.w.db)).toBe('2026-11-24');
    const status = await readStatus(tw.w.db);
    expect(status.days.partial).toBe(1);
    expect(status.partialDays).toEqual([
      { day: '2026-11-25', lastPullAt: again.finished_at!.toISOString(), rows: later.length },
    ]);
    expect(status.watermark).toBe('2026-11-24');
    // Freshness: the open day beside the export's (which the watermark day dates).
    expect(status.freshness.export.open_day).toEqual({
      day: '2026-11-25',
      pulled_at: again.finished_at!.toISOString(),
      age_seconds: expect.any(Number),
    });
  });

  it('when a message of the open day is removed upstream, then it stays live after the next intraday pull and only the closed-day pull deletes it', async () => {
    const thread = sim.truth.exportDay('2026-11-25')[0]!['Thread ID'];
    goneIds = sim.truth
      .exportDay('2026-11-25')
      .filter((r) => r['Thread ID'] === thread)
      .map((r) => r['Message ID'].toLowerCase());
    sim.dataset.deleteById(thread);
    expect(sim.truth.exportDay('2026-11-25').some((r) => r['Thread ID'] === thread)).toBe(false);

    await intraday(at('2026-11-25T17:00:00Z'));
    expect(await liveOf(goneIds)).toBe(goneIds.length);
    expect((await dayRow('2026-11-25')).rows_deleted).toBe(0);

    // After midnight and the 00:30 close: the day is pulled as a complete day.
    await intraday(at('2026-11-26T01:00:00Z'));
    expect(await liveOf(goneIds)).toBe(0);
    expect(await warehouseRows(tw.w, ['2026-11-25'])).toEqual(expectedRows(sim, ['2026-11-25']));
    expect((await dayRow('2026-11-25')).status).toBe('complete');
    expect((await dayRow('2026-11-26')).status).toBe('partial');
    expect(await getWatermark(tw.w.db)).toBe('2026-11-25');
    expect((await readStatus(tw.w.db)).freshness.export.open_day?.day).toBe('2026-11-26');
  });

  it('when an intraday run and the daily run want the same closed day at once, then one waits for the other and the day is exact', async () => {
    const now = at('2026-11-27T01:00:00Z');
    const day = '2026-11-26';
    const before: string[] = [];
    for await (const e of h.client.workflow.list({ query: `WorkflowId = '${DAY_WORKFLOW_PREFIX}${day}'` }))
      before.push(e.runId);
    // Both are waiting on the task queue before a worker picks them up.
    const a = await h.client.workflow.start(syncIntraday, {
      taskQueue: h.taskQueue,
      workflowId: `intraday-${++runs}`,
      args: [{ enrich: false, now }],
    });
    const b = await h.client.workflow.start(syncWindow, {
      taskQueue: h.taskQueue,
      workflowId: `daily-${runs}`,
      args: [{ kind: 'scheduled', from: day, to: day, enrich: false }],
    });
    const worker = await createTestWorker(h, { warehouse: tw.w, env: sim.env() });
    const [ra, rb] = await worker.runUntil(Promise.all([a.result(), b.result()]));
    // The daily run has one day; the intraday run the closed day and the open one.
    expect(rb.totals.daysLoaded + rb.totals.daysAttached).toBe(1);
    expect(ra.totals.daysLoaded + ra.totals.daysAttached).toBe(2);
    expect(ra.totals.daysAttached + rb.totals.daysAttached).toBe(1);
    const after: string[] = [];
    for await (const e of h.client.workflow.list({ query: `WorkflowId = '${DAY_WORKFLOW_PREFIX}${day}'` }))
      after.push(e.runId);
    expect(after.length - before.length).toBe(1);
    expect((await dayRow(day)).status).toBe('complete');
    expect(await warehouseRows(tw.w, [day])).toEqual(expectedRows(sim, [day]));
  });
});

// What `crs-sync status` shows under "recent runs" (the `sync_runs` ledger) against what the
// warehouse holds, over a day of hourly intraday runs. Its own warehouse, simulator and days.
describe("intraday runs' counts (simulator, Postgres, dev server)", () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator;
  let clock = Date.parse('2026-10-10T10:00:00Z');
  let runs = 0;

  beforeAll(async () => {
    h = await connectHarness('intraday');
    tw = await createTestWarehouse({ prefix: 'tintrac' });
    sim = await startSimulator({
      port: 0,
      now: () => new Date(clock),
      seed: 12,
      days: 2,
      recordsPerDay: 300,
    });
  });

  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
    await h?.close();
  });

  const rowsInWarehouse = async () =>
    Number(
      (
        await tw.w.db
          .selectFrom('analytics_messages')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('when hourly intraday runs follow the one that loaded the closed day, then each run reports as inserted what the warehouse grew by, and the runs sum to the rows', async () => {
    const reported: { inserted: number; grew: number; attached: number }[] = [];
    for (const iso of [
      '2026-10-10T10:00:00Z',
      '2026-10-10T11:00:00Z',
      '2026-10-10T12:00:00Z',
      '2026-10-10T13:00:00Z',
    ]) {
      clock = Date.parse(iso);
      const before = await rowsInWarehouse();
      const worker = await createTestWorker(h, { warehouse: tw.w, env: sim.env() });
      const r = await worker.runUntil(
        h.client.workflow.execute(syncIntraday, {
          taskQueue: h.taskQueue,
          workflowId: `intraday-counts-${++runs}`,
          args: [{ enrich: false, now: iso }],
        }),
      );
      const ledger = await tw.w.db
        .selectFrom('sync_runs')
        .select(['rows_inserted'])
        .where('load_id', '=', r.runId)
        .executeTakeFirstOrThrow();
      expect(Number(ledger.rows_inserted)).toBe(r.totals.inserted);
      reported.push({
        inserted: r.totals.inserted,
        grew: (await rowsInWarehouse()) - before,
        attached: r.totals.daysAttached,
      });
    }
    // The first run loaded the closed day (2026-10-09) itself; the later ones found it loaded.
    expect(reported.map((x) => x.attached)).toEqual([0, 1, 1, 1]);
    expect(reported[0]!.inserted).toBeGreaterThan(0);
    for (const [i, x] of reported.entries()) expect(x.inserted, `run ${i + 1}`).toBe(x.grew);
    const sum = await tw.w.db
      .selectFrom('sync_runs')
      .select((eb) => eb.fn.sum<string>('rows_inserted').as('n'))
      .where('kind', '=', 'intraday')
      .executeTakeFirstOrThrow();
    expect(Number(sum.n)).toBe(await rowsInWarehouse());
  });
});
