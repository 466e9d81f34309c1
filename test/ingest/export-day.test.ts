import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { closedDayLoad, openDayLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { parseRecord } from '../../src/ingest/parse/record-parser.ts';
import { loadExportDay } from '../../src/ingest/source/export-day.ts';
import { createLogger } from '../../src/log.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

const log = createLogger({ level: 'silent', pretty: false });

/** The warehouse rows of a day, in the shape the parser gives a record, for a row-by-row compare. */
async function warehouseDay(tw: TestWarehouse, day: string) {
  const r = await tw.w.pool.query(
    `select message_id, thread_id, user_id, message_time, message_date::text as message_date, input, response,
            extra, record_hash from analytics_messages where message_date = $1 and _deleted_at is null
     order by message_id`,
    [day],
  );
  return r.rows.map((x) => ({ ...x, message_time: (x.message_time as Date).getTime() }));
}

function truthDay(sim: Simulator, day: string) {
  const rows = new Map<string, Record<string, unknown>>();
  for (const line of sim.truth.exportDayLines(day)) {
    const p = parseRecord(line);
    if (!p.ok) throw new Error(`simulator served a line its own contract rejects: ${p.detail}`);
    const r = p.record;
    rows.set(r.messageId, {
      message_id: r.messageId,
      thread_id: r.threadId,
      user_id: r.userId,
      message_time: Math.floor(Date.parse(r.messageTime)),
      message_date: r.messageDate,
      input: r.input,
      response: r.response,
      extra: r.extra === null ? null : JSON.parse(JSON.stringify(r.extra)),
      record_hash: r.recordHash,
    });
  }
  return [...rows.values()].sort((a, b) => String(a.message_id).localeCompare(String(b.message_id)));
}

describe('export day load over HTTP', () => {
  let sim: Simulator;
  let tw: TestWarehouse;
  let day: string;
  beforeAll(async () => {
    sim = await startSimulator({ seed: 7, days: 4, recordsPerDay: 600, now: runningClock(PINNED) });
    tw = await createTestWarehouse();
    const days = sim.truth.days();
    day = days[days.length - 3]!;
  });
  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
  });

  const deps = (faults?: string) => {
    const config = parseConfig({ ...sim.env(), CRS_BATCH_SIZE: '100', CRS_RATE_LIMIT_RPS: '1000' });
    const client = createServiceClient(
      {
        ...config.api,
        concurrency: 4,
        baseBackoffMs: 5,
        maxBackoffMs: 50,
        maxRetryAfterMs: 50,
        ...(faults ? { extraHeaders: { 'x-sim-faults': faults } } : {}),
      },
      log,
    );
    return { warehouse: tw.w, client, config, log };
  };

  it('when the export stream is cut mid-line and lines are malformed or duplicated, then the day equals the ground truth row by row', async () => {
    const s = await loadExportDay(deps('cut=0.6,malformed=0.01,duplicate=0.01,5xx=0.5:2'), {
      target: closedDayLoad('faulty-1', day),
    });
    const expected = truthDay(sim, day);
    expect(expected.length).toBeGreaterThan(100);
    expect(await warehouseDay(tw, day)).toEqual(expected);
    expect(s.inserted).toBe(expected.length);
    // The faults really happened: the stream was cut and reopened, and bad lines were quarantined.
    expect(s.reopens).toBeGreaterThan(0);
    expect(s.rejected).toBeGreaterThan(0);
    const ledger = await tw.w.pool.query(
      'select status, rows_inserted, rows_rejected from sync_days where day = $1',
      [day],
    );
    expect(ledger.rows[0]).toMatchObject({ status: 'complete', rows_inserted: expected.length });
    expect(ledger.rows[0].rows_rejected).toBe(s.rejected);
  });

  it('when the same day is loaded again with no faults, then every row is unchanged and no row is written', async () => {
    const before = await tw.w.pool.query(
      'select message_id, _loaded_at, _load_id from analytics_messages order by 1',
    );
    const s = await loadExportDay(deps(), { target: closedDayLoad('clean-2', day) });
    expect(s).toMatchObject({ inserted: 0, updated: 0, rejected: 0, deleted: 0 });
    expect(s.unchanged).toBe(truthDay(sim, day).length);
    const after = await tw.w.pool.query(
      'select message_id, _loaded_at, _load_id from analytics_messages order by 1',
    );
    expect(after.rows).toEqual(before.rows);
  });

  it('when a day is pulled as the open day (partial), then the ledger records no export checksum; when it is then pulled complete, then it records the sha256 of the download', async () => {
    const days = sim.truth.days();
    const other = days[days.length - 2]!;
    const checksum = async () =>
      (
        await tw.w.pool.query<{ c: string | null }>(
          'select export_checksum as c from sync_days where day = $1',
          [other],
        )
      ).rows[0]?.c;
    const partial = await loadExportDay(deps(), { target: openDayLoad('open-1', other) });
    expect(partial.inserted).toBe(truthDay(sim, other).length);
    expect(await checksum()).toBeNull();
    await loadExportDay(deps(), { target: closedDayLoad('closed-1', other) });
    expect(await checksum()).toMatch(/^[0-9a-f]{64}$/);
  });
});
