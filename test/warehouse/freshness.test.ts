import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shiftDay, utcDay } from '../../src/common/civil-date.ts';
import { readWarehouseGauges } from '../../src/warehouse/gauges.ts';
import { getWatermark, markDayRunning, recordDayLoaded } from '../../src/warehouse/ledger.ts';
import { describeFreshness, healthViewFreshness, readFreshness } from '../../src/warehouse/read/freshness.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const SLA = 26 * 3600;
const counts = { rowsRead: 10, inserted: 10, updated: 0, unchanged: 0, rejected: 0, suppressed: 0 };

// Freshness with a day pulled intraday, through the ledger's own writes (the finalize's
// recordDayLoaded, a pull's markDayRunning) on real Postgres.
describe('freshness with the open day pulled intraday (Postgres)', () => {
  let tw: TestWarehouse;
  // The days are the real ones: the view judges by the server's now().
  const today = utcDay(new Date());
  const yesterday = shiftDay(today, -1);

  const load = (day: string, open: boolean) =>
    recordDayLoaded(
      tw.w.pool,
      { day, ...counts },
      { runId: `load-${day}-${open}`, complete: !open, bytes: 100, linesCommitted: 10, open },
    );
  const pulledAt = async (day: string) =>
    (await tw.w.pool.query<{ at: Date }>('select pulled_at as at from sync_days where day = $1', [day]))
      .rows[0]?.at;

  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'tfresh' });
    for (const d of [shiftDay(today, -3), shiftDay(today, -2), yesterday]) await load(d, false);
  });

  afterAll(async () => {
    await tw?.dispose();
  });

  it('when no day was pulled intraday, then the export has no open day, and the view says the same', async () => {
    const f = await readFreshness(tw.w.db, SLA);
    expect(f.export.open_day).toBeNull();
    expect((await healthViewFreshness(tw.w.pool)).export.open_day).toBeNull();
    expect(describeFreshness(f)).not.toContain('open day');
  });

  it('when the open day is pulled intraday, then the watermark and the export age stop at the complete days, and open_day gives the day, its last pull and its age', async () => {
    await load(today, true);
    const at = await pulledAt(today);
    expect(at).toBeInstanceOf(Date);
    const now = new Date(at!.getTime() + 900_000);

    expect(await getWatermark(tw.w.db)).toBe(yesterday);
    const f = await readFreshness(tw.w.db, SLA, now);
    // The age runs from the end of yesterday, the watermark day, as without the pull.
    expect(f.export.age_seconds).toBe(Math.floor((now.getTime() - Date.parse(`${today}T00:00:00Z`)) / 1000));
    expect(f.export.state).toBe('on_time');
    expect(f.export.open_day).toEqual({ day: today, pulled_at: at!.toISOString(), age_seconds: 900 });
    expect(describeFreshness(f)).toContain(`; open day ${today} pulled intraday 0h 15m ago`);
    expect((await readWarehouseGauges(tw.w.db, now)).openDayPullAgeSeconds).toBe(900);
  });

  it('when the next pull of the open day is running, then open_day still gives the last pull that finished', async () => {
    const at = await pulledAt(today);
    await markDayRunning(tw.w.db, today, 'load-next-pull');
    const now = new Date(at!.getTime() + 60_000);
    expect((await readFreshness(tw.w.db, SLA, now)).export.open_day).toEqual({
      day: today,
      pulled_at: at!.toISOString(),
      age_seconds: 60,
    });
    await load(today, true);
  });

  it('when the view is read at the same instant as the read model, then sync_health gives the same open day', async () => {
    const client = await tw.w.pool.connect();
    try {
      // One transaction: the view's now() is the instant the read model is given.
      await client.query('begin');
      const { rows } = await client.query<{ now: Date }>('select now() as now');
      const fromView = await healthViewFreshness(client);
      await client.query('commit');
      const fromModel = await readFreshness(tw.w.db, SLA, rows[0]!.now);
      expect(fromView.export.open_day).toEqual(fromModel.export.open_day);
      expect(fromView.export.open_day?.day).toBe(today);
      expect(fromView.export.state).toBe(fromModel.export.state);
    } finally {
      client.release();
    }
  });

  it('when crs-sync status runs, then its freshness line names the open day and its JSON carries open_day', () => {
    const env = { ...process.env, LOG_LEVEL: 'silent', DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema };
    const run = (args: string[]) =>
      spawnSync(process.execPath, [path.join(root, 'bin/crs-sync.js'), ...args], { env, encoding: 'utf8' });
    const text = run(['status']);
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(
      new RegExp(`^freshness {3}export on_time .*; open day ${today} pulled intraday \\d+h \\d+m ago$`, 'm'),
    );
    const json = run(['status', '--json']);
    expect(json.status).toBe(0);
    expect(JSON.parse(json.stdout).freshness.export.open_day).toMatchObject({ day: today });
  });

  it('when the day closes and is loaded complete, then it leaves open_day and the watermark reaches it', async () => {
    await load(today, false);
    expect(await getWatermark(tw.w.db)).toBe(today);
    expect((await readFreshness(tw.w.db, SLA)).export.open_day).toBeNull();
    expect((await healthViewFreshness(tw.w.pool)).export.open_day).toBeNull();
    expect((await readWarehouseGauges(tw.w.db)).openDayPullAgeSeconds).toBeNull();
  });
});
