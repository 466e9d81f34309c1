import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { CrsError } from '../../src/errors.ts';
import { runLoad } from '../../src/ingest/merge/load.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { makeRecords, toJsonl, uuidFrom } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

const log = createLogger({ level: 'silent', pretty: false });
const dir = mkdtempSync(path.join(tmpdir(), 'crs-import-'));
let n = 0;
function file(content: string): string {
  const p = path.join(dir, `f${n++}.jsonl`);
  writeFileSync(p, content);
  return p;
}

describe('import', () => {
  let tw: TestWarehouse;
  const config = parseConfig({ CRS_BATCH_SIZE: '50', CRS_LOAD_PARTITIONS: '3' });
  beforeAll(async () => {
    tw = await createTestWarehouse();
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  const snapshot = async () =>
    (
      await tw.w.pool.query(
        `select message_id, thread_id, user_id, message_time, message_date::text, input, response, extra,
                record_hash, _load_id, _loaded_at, _deleted_at from analytics_messages order by message_id`,
      )
    ).rows;

  it('when a file is imported twice, then the second import reports every row unchanged and changes no row', async () => {
    const f = file(toJsonl(makeRecords(400)));
    const first = await importFile(tw.w, config, log, { file: f });
    expect(first).toMatchObject({ rowsRead: 400, inserted: 400, updated: 0, unchanged: 0, rejected: 0 });
    const before = await snapshot();
    const second = await importFile(tw.w, config, log, { file: f });
    expect(second.loadId).not.toBe(first.loadId);
    expect(second).toMatchObject({ rowsRead: 400, inserted: 0, updated: 0, unchanged: 400 });
    expect(await snapshot()).toEqual(before);
  });

  it('when a re-import has the same records written differently and one changed, then only the changed one is updated', async () => {
    const recs = makeRecords(50, { seed: 'bytes' });
    await importFile(tw.w, config, log, { file: file(toJsonl(recs)) });
    // Same values, other key order and spacing: other bytes, same record.
    const reordered = recs.map((r) =>
      JSON.stringify(Object.fromEntries(Object.entries(r).reverse()), null, 1).replaceAll('\n', ''),
    );
    const changed = { ...recs[7]!, Response: 'a corrected answer' };
    reordered[7] = JSON.stringify(changed);
    const before = await snapshot();
    const s = await importFile(tw.w, config, log, { file: file(toJsonl(reordered)) });
    expect(s).toMatchObject({ rowsRead: 50, inserted: 0, updated: 1, unchanged: 49 });
    const after = await snapshot();
    const diff = after.filter((row, i) => JSON.stringify(row) !== JSON.stringify(before[i]));
    expect(diff.map((d) => d.message_id)).toEqual([changed['Message ID']]);
    expect(diff[0].response).toBe('a corrected answer');
  });

  it('when one load holds the same message id twice, then one row remains with the later line', async () => {
    const recs = makeRecords(3, { seed: 'dup' });
    const later = { ...recs[0]!, Response: 'the later version' };
    const f = file(toJsonl([recs[0], recs[1], recs[2], later]));
    const s = await importFile(tw.w, config, log, { file: f });
    expect(s).toMatchObject({ rowsRead: 4, inserted: 3, updated: 1 });
    const row = await tw.w.pool.query('select response from analytics_messages where message_id = $1', [
      recs[0]!['Message ID'],
    ]);
    expect(row.rows).toEqual([{ response: 'the later version' }]);
  });

  it('when a re-import holds a stored key twice in a batch, once with its stored bytes and once changed, then the lines apply one at a time and the later one wins', async () => {
    const recs = makeRecords(3, { seed: 'twice' });
    await importFile(tw.w, config, log, { file: file(toJsonl(recs)) });
    const changed = recs.map((r) => ({ ...r, Response: 'changed' }));
    // Stored bytes then changed; stored bytes twice; changed then the stored bytes again.
    const lines = [recs[0], changed[0], recs[1], recs[1], changed[2], recs[2]];
    const s = await importFile(tw.w, config, log, { file: file(toJsonl(lines)) });
    expect(s).toMatchObject({ rowsRead: 6, inserted: 0, updated: 3, unchanged: 3 });
    const rows = await tw.w.pool.query<{ id: string; response: string }>(
      'select message_id::text as id, response from analytics_messages where message_id = any($1::uuid[])',
      [recs.map((r) => r['Message ID'])],
    );
    const byId = new Map(rows.rows.map((r) => [r.id, r.response]));
    expect(recs.map((r) => byId.get(String(r['Message ID'])))).toEqual([
      'changed',
      recs[1]!.Response,
      recs[2]!.Response,
    ]);
  });

  it('when lines break the record contract, then they are quarantined with line number and code and the rest loads', async () => {
    const good = makeRecords(5, { seed: 'rej' });
    const badUuid = { ...makeRecords(1, { seed: 'rej2' })[0]!, 'Thread ID': 'not-a-uuid' };
    const f = file(
      toJsonl([good[0], '{"truncated": ', good[1], '', '[1,2,3]', badUuid, good[2], good[3], good[4]]),
    );
    const s = await importFile(tw.w, config, log, { file: f });
    expect(s).toMatchObject({ rowsRead: 8, inserted: 5, rejected: 3 });
    const rej = await tw.w.pool.query(
      'select line_no, error_code, raw from rejected_records where _load_id = $1 order by line_no',
      [s.loadId],
    );
    expect(rej.rows.map((r) => [r.line_no, r.error_code])).toEqual([
      [2, 'invalid_json'],
      [5, 'not_an_object'],
      [6, 'invalid_uuid'],
    ]);
    expect(rej.rows[0].raw).toBe('{"truncated": ');
  });

  it('when a line exceeds the line limit, then it is quarantined with its prefix and its length', async () => {
    const small = parseConfig({ CRS_BATCH_SIZE: '50', CRS_MAX_LINE_BYTES: '4096' });
    const recs = makeRecords(2, { seed: 'long' });
    const long = { ...makeRecords(1, { seed: 'long2' })[0]!, Response: 'x'.repeat(100_000) };
    const f = file(toJsonl([recs[0], long, recs[1]]));
    const s = await importFile(tw.w, small, log, { file: f });
    expect(s).toMatchObject({ inserted: 2, rejected: 1 });
    const rej = await tw.w.pool.query(
      'select error_code, raw_length, octet_length(raw_bytes) as kept from rejected_records where _load_id = $1',
      [s.loadId],
    );
    expect(rej.rows[0].error_code).toBe('line_too_long');
    expect(rej.rows[0].raw_length).toBe(Buffer.byteLength(JSON.stringify(long)));
    expect(rej.rows[0].kept).toBeLessThan(100_000);
  });

  it('when a complete day loses a record and later gets it back, then the row is marked deleted and then undeleted', async () => {
    const day = '2026-10-05';
    const recs = makeRecords(6, { day, seed: 'del' });
    const window = { from: day, to: day };
    // One of six is above the default delete guard (test/ingest/delete-guard.test.ts): off here.
    const config = parseConfig({ CRS_BATCH_SIZE: '50', CRS_LOAD_PARTITIONS: '3', CRS_DELETE_GUARD: '100' });
    await importFile(tw.w, config, log, { file: file(toJsonl(recs)), wholeDays: window });
    const gone = recs[2]!['Message ID'];
    const without = await importFile(tw.w, config, log, {
      file: file(toJsonl(recs.filter((r) => r['Message ID'] !== gone))),
      wholeDays: window,
    });
    expect(without).toMatchObject({ deleted: 1, unchanged: 5 });
    const state = async () =>
      (
        await tw.w.pool.query(
          'select _deleted_at is not null as d from analytics_messages where message_id = $1',
          [gone],
        )
      ).rows[0].d;
    expect(await state()).toBe(true);
    const ledger = await tw.w.pool.query('select status, rows_deleted from sync_days where day = $1', [day]);
    expect(ledger.rows[0]).toEqual({ status: 'complete', rows_deleted: 1 });

    const back = await importFile(tw.w, config, log, { file: file(toJsonl(recs)), wholeDays: window });
    expect(back).toMatchObject({ deleted: 0, updated: 1, unchanged: 5 });
    expect(await state()).toBe(false);
  });

  it('when no window is declared, then rows missing from the file are not deleted', async () => {
    const day = '2026-10-06';
    const recs = makeRecords(3, { day, seed: 'nodel' });
    await importFile(tw.w, config, log, { file: file(toJsonl(recs)) });
    const s = await importFile(tw.w, config, log, { file: file(toJsonl(recs.slice(0, 1))) });
    expect(s.deleted).toBe(0);
    const live = await tw.w.pool.query(
      'select count(*)::int as n from analytics_messages where message_date = $1 and _deleted_at is null',
      [day],
    );
    expect(live.rows[0].n).toBe(3);
  });

  it('when a resumed load finds its source changed before the checkpoint, then the shifted lines are still loaded', async () => {
    const recs = makeRecords(3000, { seed: 'shift', day: '2026-10-08' });
    const load = (lines: string, failAfterBytes?: number) =>
      runLoad({
        warehouse: tw.w,
        log,
        target: fileLoad('shifting-load', 'test'),
        open: async () =>
          (async function* () {
            const bytes = Buffer.from(lines);
            if (failAfterBytes === undefined) {
              yield bytes;
              return;
            }
            // Enough for some batches to commit, then the source breaks for good.
            for (let i = 0; i < failAfterBytes; i += 16_384) {
              yield bytes.subarray(i, Math.min(i + 16_384, failAfterBytes));
              await new Promise((r) => setTimeout(r, 5));
            }
            throw new CrsError('INPUT_UNREADABLE', 'disk gone');
          })(),
        batchSize: 50,
        parts: 3,
        maxLineBytes: 1 << 20,
      });
    const text = toJsonl(recs);
    await expect(load(text, Math.floor(text.length / 2))).rejects.toMatchObject({ code: 'INPUT_UNREADABLE' });
    const cp = await tw.w.pool.query(
      "select min(lines_committed)::int as n from load_checkpoints where load_key = 'shifting-load'",
    );
    expect(cp.rows[0].n).toBeGreaterThan(100);
    // A late record now sits at the top of the source: every line after it moved down by one.
    const late = makeRecords(1, { seed: 'shift-late', day: '2026-10-08' })[0]!;
    const s = await load(toJsonl([late, ...recs]));
    expect(s.resumed).toBe(true);
    const n = await tw.w.pool.query(
      "select count(*)::int as n from analytics_messages where message_date = '2026-10-08' and _deleted_at is null",
    );
    expect(n.rows[0].n).toBe(3001);
    const lateRow = await tw.w.pool.query('select 1 from analytics_messages where message_id = $1', [
      late['Message ID'],
    ]);
    expect(lateRow.rowCount).toBe(1);
  });

  it('when records are loaded, then their threads are queued for enrichment with their aggregates', async () => {
    const recs = makeRecords(9, { seed: 'thr', threads: 2, day: '2026-10-07' });
    await importFile(tw.w, config, log, { file: file(toJsonl(recs)) });
    const t = await tw.w.pool.query('select enrich_status, message_count from threads where thread_id = $1', [
      uuidFrom('thr:t:0'),
    ]);
    expect(t.rows[0]).toEqual({ enrich_status: 'pending', message_count: 5 });
  });
});
