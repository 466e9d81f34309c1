import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { openDayLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { OPEN_DAY_REASON } from '../../src/ingest/finalize/finalize.ts';
import { loadExportDay } from '../../src/ingest/source/export-day.ts';
import { createLogger } from '../../src/log.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

const log = createLogger({ level: 'silent', pretty: false });

/** The ledger of an intraday pull whose export was not whole (simulator over HTTP, Postgres). */
describe('the open day in the ledger', () => {
  let sim: Simulator;
  let tw: TestWarehouse;
  beforeAll(async () => {
    sim = await startSimulator({ seed: 9, days: 3, recordsPerDay: 400, now: runningClock(PINNED) });
    tw = await createTestWarehouse({ prefix: 'open_ledger' });
  });
  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
  });

  const pull = (day: string, loadId: string, faults?: string) => {
    const config = parseConfig({ ...sim.env(), CRS_BATCH_SIZE: '100', CRS_RATE_LIMIT_RPS: '1000' });
    const client = createServiceClient(
      { ...config.api, concurrency: 2, ...(faults ? { extraHeaders: { 'x-sim-faults': faults } } : {}) },
      log,
    );
    return loadExportDay({ warehouse: tw.w, client, config, log }, { target: openDayLoad(loadId, day) });
  };
  const reason = async (day: string) =>
    (
      await tw.w.pool.query<{ r: string | null; s: string }>(
        'select export_incomplete_reason as r, status as s from sync_days where day = $1',
        [day],
      )
    ).rows[0];

  it('when an intraday pull reads an export cut cleanly short, then the day is partial and its ledger says both why nothing was deleted and that the export was not whole; a whole pull says only the first', async () => {
    const day = sim.truth.days().at(-1) ?? '';
    await pull(day, 'cut-1', 'truncate=1');
    const cut = await reason(day);
    expect(cut?.s).toBe('partial');
    expect(cut?.r).toMatch(
      new RegExp(`^${OPEN_DAY_REASON.replace(/[()]/g, '\\$&')}; the export was not whole: .+`),
    );
    await pull(day, 'whole-1');
    expect(await reason(day)).toEqual({ r: OPEN_DAY_REASON, s: 'partial' });
  });
});
