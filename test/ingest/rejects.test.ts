import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileLoad, openDayLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { runLoad } from '../../src/ingest/merge/load.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { replayRejects } from '../../src/ingest/source/replay.ts';
import { createLogger } from '../../src/log.ts';
import { readWarehouseGauges } from '../../src/warehouse/gauges.ts';
import { markDayRunning } from '../../src/warehouse/ledger.ts';
import { listRejects } from '../../src/warehouse/quarantine.ts';
import { readStatus } from '../../src/warehouse/read/status.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { tempFiles } from '../helpers/load-files.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

const log = createLogger({ level: 'silent', pretty: false });
const root = path.resolve(import.meta.dirname, '..', '..');
const config = parseConfig({});

describe('rejects replay', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse();
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when a quarantined line is valid under the current parser, then replay loads it and marks it replayed; a still-bad one stays open with the new reason', async () => {
    const good = makeRecords(1, { seed: 'replay' })[0]!;
    // As if an older contract had rejected a valid line.
    await tw.w.db
      .insertInto('rejected_records')
      .values([
        {
          _load_id: 'old-load',
          source: 'export',
          source_name: 'export:2026-11-01',
          day: '2026-11-01',
          line_no: 7,
          raw: JSON.stringify(good),
          error_code: 'invalid_uuid',
          error_detail: 'stale rule',
        },
        {
          _load_id: 'old-load',
          source: 'export',
          source_name: 'export:2026-11-01',
          day: '2026-11-01',
          line_no: 8,
          raw: '{"still": "broken"',
          error_code: 'invalid_json',
          error_detail: 'truncated',
        },
      ])
      .execute();

    const r = await replayRejects(tw.w, config, log, { loadId: 'old-load' });
    expect(r).toMatchObject({ selected: 2, loaded: 1, stillRejected: 1 });
    const row = await tw.w.pool.query('select response from analytics_messages where message_id = $1', [
      good['Message ID'],
    ]);
    expect(row.rows).toEqual([{ response: good.Response }]);
    const rej = await tw.w.pool.query(
      'select line_no, replayed_at is not null as replayed, replay_result from rejected_records order by line_no',
    );
    expect(rej.rows.map((x) => [x.line_no, x.replayed])).toEqual([
      [7, true],
      [8, false],
    ]);
    expect(rej.rows[1].replay_result).toMatch(/^still rejected: invalid_json/);

    const status = await readStatus(tw.w.db);
    expect(status.rejects).toEqual([
      { source: 'export', errorCode: 'invalid_json', open: 1, replayed: 0, closed: 0 },
      { source: 'export', errorCode: 'invalid_uuid', open: 0, replayed: 1, closed: 0 },
    ]);
    expect(status.messages.live).toBe(1);
  });
});

/**
 * The quarantine as intraday pulls, imports and replays meet the same bad line again: one open
 * reject per line, counting the loads that read it. Pulls are run through the loader as the
 * intraday activity runs them (an export of the open day, partial, its ledger day), with the
 * day's export growing between pulls and records arriving before the bad line, so it moves down.
 */
describe('one open reject per line', () => {
  const DAY = '2026-11-20';
  const good = makeRecords(40, { day: DAY, seed: 'one-per-line' });
  // Not JSON (cut short), its id and time readable: an invalid_json reject of DAY with a message id.
  const badId = '0b2c7b5e-5a6c-4f3e-9d1a-2f6a1c3b4d5e';
  const bad = `{"Message ID": "${badId}", "Message Time": "${DAY}T10:00:00Z", "Input": "cut`;
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'one_reject' });
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  /** The day's export after `n` records, the bad line after the first `at` (default 3). */
  const exportAfter = (n: number, at = 3) => [...good.slice(0, at), bad, ...good.slice(at, n)];

  /** The export in chunks of 2 lines; a first run told to die throws once it passes `dieAt` lines. */
  function pull(loadId: string, lines: unknown[], dieAt?: number) {
    return runLoad({
      warehouse: tw.w,
      log,
      target: openDayLoad(loadId, DAY),
      open: async () =>
        (async function* () {
          for (let i = 0; i < lines.length; i += 2) {
            if (dieAt !== undefined && i >= dieAt) throw new Error('the worker died in the test');
            yield Buffer.from(toJsonl(lines.slice(i, i + 2)));
          }
        })(),
      batchSize: 2,
      parts: 2,
      maxLineBytes: 1 << 20,
      maxReopens: 0,
    });
  }

  async function intraday(loadId: string, lines: unknown[]) {
    await markDayRunning(tw.w.db, DAY, loadId);
    return pull(loadId, lines);
  }

  const quarantine = async () =>
    (
      await tw.w.pool.query(
        `select source, day::text, line_no::int, _load_id, last_load_id, times_seen::int, message_id::text,
                error_code, replayed_at is not null as replayed, last_seen_at >= received_at as ordered
         from rejected_records order by id`,
      )
    ).rows;

  it('when four intraday pulls of a day read the same bad line, then it is one open reject seen 4 times with the last pull, and every figure counts one line', async () => {
    const pulls = ['pull-1', 'pull-2', 'pull-3', 'pull-4'];
    for (const [i, loadId] of pulls.entries()) {
      const s = await intraday(loadId, exportAfter(10 + 5 * i, 3 + i));
      // Each pull's own count is what it read: one quarantined line.
      expect([loadId, s.rejected]).toEqual([loadId, 1]);
      expect(s.days.find((d) => d.day === DAY)?.rejected).toBe(1);
    }
    expect(await quarantine()).toEqual([
      {
        source: 'export',
        day: DAY,
        line_no: 4,
        _load_id: 'pull-1',
        last_load_id: 'pull-4',
        times_seen: 4,
        message_id: badId,
        error_code: 'invalid_json',
        replayed: false,
        ordered: true,
      },
    ]);
    const ledger = await tw.w.pool.query('select rows_rejected::int as j from sync_days where day = $1', [
      DAY,
    ]);
    expect(ledger.rows).toEqual([{ j: 1 }]);

    // As an operator lists them: one line, read by four pulls, the first and the last named.
    const listed = spawnSync(process.execPath, [path.join(root, 'bin/crs-sync.js'), 'rejects', 'list'], {
      env: { ...process.env, LOG_LEVEL: 'silent', DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema },
      encoding: 'utf8',
    });
    expect(listed.status).toBe(0);
    const table = listed.stdout.trim().split('\n');
    expect(table).toHaveLength(3);
    expect(table[0]).toMatch(/^id\s+source\s+day\s+loads\s+first load id\s+line\s+last load id\s+message id/);
    expect(table[2]).toMatch(
      new RegExp(`^\\s*\\d+\\s+export\\s+${DAY}\\s+4\\s+pull-1\\s+4\\s+pull-4\\s+${badId}\\s+invalid_json`),
    );
    expect(await listRejects(tw.w.db, {})).toHaveLength(1);
    expect(await listRejects(tw.w.db, { loadId: 'pull-3' })).toHaveLength(0);
    expect(await listRejects(tw.w.db, { loadId: 'pull-4' })).toHaveLength(1);
    const health = await tw.w.pool.query(
      'select open_rejects::int as n, open_rejects_export::int as e from sync_health',
    );
    expect(health.rows).toEqual([{ n: 1, e: 1 }]);
    expect((await readStatus(tw.w.db)).rejects).toEqual([
      { source: 'export', errorCode: 'invalid_json', open: 1, replayed: 0, closed: 0 },
    ]);
    expect((await readWarehouseGauges(tw.w.db)).quarantineOpen).toEqual([
      { source: 'export', code: 'invalid_json', lines: 1 },
    ]);
    // The bad line's row is not deleted for its absence, and the good ones all loaded.
    const live = await tw.w.pool.query(
      'select count(*)::int n from analytics_messages where _deleted_at is null',
    );
    expect(live.rows).toEqual([{ n: 25 }]);
  });

  it('when a pull dies after committing the bad line and runs again, then the line is counted once for it', async () => {
    await markDayRunning(tw.w.db, DAY, 'pull-5');
    // Dies at its 20th line: the batches up to there (the bad line's, line 4) have committed.
    await expect(pull('pull-5', exportAfter(30), 20)).rejects.toThrow('the worker died in the test');
    expect((await quarantine())[0]).toMatchObject({ last_load_id: 'pull-5', times_seen: 5 });
    const resumed = await pull('pull-5', exportAfter(30));
    expect(resumed.resumed).toBe(true);
    expect(resumed.rejected).toBe(1);
    expect((await quarantine())[0]).toMatchObject({ last_load_id: 'pull-5', times_seen: 5 });
    expect(await quarantine()).toHaveLength(1);
  });

  it('when the same file is imported twice, then its bad line is one file reject seen twice; the export day keeps its own', async () => {
    const config = parseConfig({ CRS_BATCH_SIZE: '3' });
    const file = tempFiles('crs-one-reject-')(toJsonl(exportAfter(12)));
    const first = await importFile(tw.w, config, log, { file });
    const second = await importFile(tw.w, config, log, { file });
    expect([first.rejected, second.rejected]).toEqual([1, 1]);
    expect(second.loadId).not.toBe(first.loadId);
    const rows = await quarantine();
    expect(rows.map((r) => [r.source, r.times_seen, r._load_id, r.last_load_id])).toEqual([
      ['export', 5, 'pull-1', 'pull-5'],
      ['file', 2, first.loadId, second.loadId],
    ]);
    expect((await tw.w.pool.query('select open_rejects::int as n from sync_health')).rows).toEqual([
      { n: 2 },
    ]);
  });

  it('when a replay reads the line and it fails again, then the replay is counted on the same reject; once replayed, the line seen again opens a new one', async () => {
    const before = (await quarantine())[0];
    const r = await replayRejects(tw.w, config, log, { source: 'export' });
    expect(r).toMatchObject({ selected: 1, loaded: 0, stillRejected: 1 });
    const after = await quarantine();
    expect(after).toHaveLength(2);
    expect(after[0]).toMatchObject({ ...before, times_seen: 6, last_load_id: r.replayLoadId });

    // A replayed (closed) reject is history: the line read again is a new open one.
    await tw.w.pool.query(`update rejected_records set replayed_at = now() where source = 'export'`);
    await intraday('pull-6', exportAfter(12));
    const rows = await quarantine();
    expect(
      rows.filter((x) => x.source === 'export').map((x) => [x.replayed, x.times_seen, x.last_load_id]),
    ).toEqual([
      [true, 6, r.replayLoadId],
      [false, 1, 'pull-6'],
    ]);
  });
});

/**
 * A reject is one row whichever loads read its line, so a load's delete step cannot take "its"
 * rejects from the quarantine: another load may be the last to have read the line by the time
 * it finalizes. It takes them from what it read (rejects-seen.ts).
 */
describe('the delete step of a load whose quarantined line another load read last', () => {
  const DAY = '2026-11-21';
  const rows = makeRecords(20, { day: DAY, seed: 'last-reader' });
  const kept = rows[5] as (typeof rows)[number];
  // The row of `kept`, as the source now sends it: a line that does not parse, its id readable.
  const broken = `{"Message ID": "${kept['Message ID']}", "Message Time": "${DAY}T11:00:00Z", "Input": "cut`;
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'last_reader' });
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  function load(loadId: string, lines: unknown[], complete: boolean, dieAt?: number) {
    return runLoad({
      warehouse: tw.w,
      log,
      target: fileLoad(loadId, `${loadId}.jsonl`, complete ? { from: DAY, to: DAY } : null),
      open: async () =>
        (async function* () {
          for (let i = 0; i < lines.length; i += 2) {
            if (dieAt !== undefined && i >= dieAt) throw new Error('the import was killed in the test');
            yield Buffer.from(toJsonl(lines.slice(i, i + 2)));
          }
        })(),
      batchSize: 2,
      parts: 2,
      maxLineBytes: 1 << 20,
      maxReopens: 0,
    });
  }

  it('when an import is killed after quarantining a line, another import reads the line, and the first resumes, then the row of the line is not deleted', async () => {
    await load('first-day', rows, false);
    const complete = rows.map((r) => (r === kept ? broken : r));
    await expect(load('import-a', complete, true, 12)).rejects.toThrow('the import was killed in the test');
    await load('import-b', [broken], false);
    const q = await tw.w.pool.query(
      'select _load_id, last_load_id, times_seen::int as n from rejected_records',
    );
    expect(q.rows).toEqual([{ _load_id: 'import-a', last_load_id: 'import-b', n: 2 }]);

    const resumed = await load('import-a', complete, true);
    expect(resumed.resumed).toBe(true);
    expect(resumed.deleted).toBe(0);
    const live = await tw.w.pool.query(
      'select count(*)::int as n from analytics_messages where _deleted_at is null and message_date = $1',
      [DAY],
    );
    expect(live.rows).toEqual([{ n: 20 }]);
  });
});
