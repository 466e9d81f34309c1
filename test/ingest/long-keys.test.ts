import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closedDayLoad } from '../../src/common/load-target.ts';
import { STORED_KEY_BYTES, storedKey } from '../../src/common/stored-key.ts';
import { parseConfig } from '../../src/config.ts';
import { loadExportDay } from '../../src/ingest/source/export-day.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { acceptSchemaDrift } from '../../src/warehouse/schema-drift.ts';
import { client, SECRETS } from '../api/helpers/client-setup.ts';
import { type ScriptedServer, startScriptedServer } from '../api/helpers/scripted-server.ts';
import { type FakeRecord, makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { CJK_KEY, DAY, day, EXPECTED_REJECTS, KEY_600, withExtra } from '../helpers/long-key-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Keys no index can hold, as an operator meets them: a line whose field name is 1 MB, 10,000
 * characters or 1,024 CJK characters (3,072 bytes), or a line of 10,000 and more keys, in a file
 * imported and in a day's export pulled over HTTP. Each line loads or is quarantined, the rest of
 * its day loads and the run succeeds; schema drift is recorded only of lines that load, its paths
 * bounded in bytes. Before, the drift path of such a key went into `schema_drift`'s primary key
 * and failed the load on every retry (`index row size 3104 exceeds btree version 4 maximum 2704`).
 */
const log = createLogger({ level: 'silent', pretty: false });
const dir = mkdtempSync(path.join(tmpdir(), 'crs-long-keys-'));
let n = 0;
function file(content: string): string {
  const p = path.join(dir, `f${n++}.jsonl`);
  writeFileSync(p, content);
  return p;
}

describe('keys no index can hold', () => {
  let tw: TestWarehouse;
  let server: ScriptedServer | undefined;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'longkeys' });
  });
  afterAll(async () => {
    await tw?.dispose();
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
    await tw.w.pool.query(
      'truncate analytics_messages, rejected_records, thread_queue, schema_drift, schema_drift_counts, sync_days',
    );
  });

  const rejectsOf = async (loadId: string) =>
    (
      await tw.w.pool.query<{ line_no: string; error_code: string; error_detail: string }>(
        'select line_no, error_code, error_detail from rejected_records where _load_id = $1 order by line_no',
        [loadId],
      )
    ).rows;

  const drift = async () =>
    (
      await tw.w.pool.query<{ path: string; kind: string; count: string; bytes: number }>(
        `select d.path, d.kind, sum(c.count)::text as count, octet_length(d.path) as bytes
         from schema_drift d join schema_drift_counts c using (source, path, kind)
         where d.source = 'export' group by d.path, d.kind order by d.path`,
      )
    ).rows;

  /** What both ways of loading the day must leave. */
  async function expectDayLoaded(loadId: string, recs: FakeRecord[]): Promise<void> {
    const rejects = await rejectsOf(loadId);
    expect(rejects.map((r) => [Number(r.line_no), r.error_code])).toEqual(EXPECTED_REJECTS);
    expect(rejects[2]?.error_detail).toContain('is 3072 bytes of UTF-8, more than 1024');
    const loaded = await tw.w.pool.query<{ message_id: string }>(
      'select message_id::text from analytics_messages where _deleted_at is null order by message_id',
    );
    expect(loaded.rows.map((r) => r.message_id)).toEqual(
      [...recs.slice(0, 8), recs[13], recs[14]].map((r) => r?.['Message ID']).sort(),
    );
    // The 600-byte key is stored whole in the row; its drift path is bounded.
    const six = await tw.w.pool.query<{ has: boolean }>(
      'select extra ? $1 as has from analytics_messages where message_id = $2',
      [KEY_600, recs[14]?.['Message ID']],
    );
    expect(six.rows).toEqual([{ has: true }]);
    const d = await drift();
    // Drift of the two lines that loaded only: Region from line 15 (not from the five quarantined
    // lines carrying it), the 600-byte key, and the 10,000 new fields of line 14.
    expect(d).toHaveLength(10_002);
    const byPath = new Map(d.map((x) => [x.path, x]));
    expect(byPath.get('Region')).toMatchObject({ kind: 'new_field', count: '1' });
    expect(byPath.get('k9999')).toMatchObject({ kind: 'new_field', count: '1' });
    const long = byPath.get(storedKey(KEY_600));
    expect(long).toMatchObject({ kind: 'new_field', count: '1' });
    expect(long?.path).toMatch(/…#[0-9a-f]{16}$/);
    expect(Math.max(...d.map((x) => x.bytes))).toBeLessThanOrEqual(STORED_KEY_BYTES);
  }

  it('when an imported file holds keys of 1 MB, 10,000 characters and 1,024 CJK characters, 10,000+ keys and a 600-byte key, then each line loads or is quarantined, the rest loads, the run succeeds and drift is recorded only of the lines that loaded', async () => {
    const { lines, recs } = day();
    const config = parseConfig({ CRS_BATCH_SIZE: '4', CRS_LOAD_PARTITIONS: '2' });
    const s = await importFile(tw.w, config, log, { file: file(toJsonl(lines)) });
    expect(s).toMatchObject({ rowsRead: 16, inserted: 10, rejected: 6 });
    const run = await tw.w.pool.query('select status from sync_runs where load_id = $1', [s.loadId]);
    expect(run.rows).toEqual([{ status: 'succeeded' }]);
    await expectDayLoaded(s.loadId, recs);
    // `schema accept` takes the long field as `schema changes` shows it, or in full.
    expect(await acceptSchemaDrift(tw.w.db, 'export', KEY_600)).toBe(1);
    const open = await tw.w.pool.query(
      "select path from schema_drift where accepted_at is null and path in ('Region', $1)",
      [storedKey(KEY_600)],
    );
    expect(open.rows).toEqual([{ path: 'Region' }]);
  });

  it('when 1,024 CJK characters (3,072 bytes) name a field of one of 8 records, then that line is quarantined key_too_long, the other 7 load and the import succeeds', async () => {
    const recs = makeRecords(8, { day: DAY, seed: 'cjk' });
    const lines = recs.map((r, i) => (i === 3 ? withExtra(r, `"${CJK_KEY}":"v"`) : JSON.stringify(r)));
    const config = parseConfig({ CRS_BATCH_SIZE: '50', CRS_LOAD_PARTITIONS: '2' });
    const s = await importFile(tw.w, config, log, { file: file(toJsonl(lines)) });
    expect(s).toMatchObject({ rowsRead: 8, inserted: 7, rejected: 1 });
    expect((await rejectsOf(s.loadId)).map((r) => [Number(r.line_no), r.error_code])).toEqual([
      [4, 'key_too_long'],
    ]);
    expect(await drift()).toEqual([]);
  });

  it('when a day pulled over HTTP holds the same lines, then the day loads complete with the same rows, quarantine and drift', async () => {
    const { lines, recs } = day();
    const body = Buffer.from(`${lines.join('\n')}\n`);
    server = await startScriptedServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson', 'content-length': String(body.length) });
      res.end(body);
    });
    const config = parseConfig({
      CRS_BASE_URL: server.url,
      CRS_SERVICE_ACCOUNT_TOKEN: SECRETS.serviceAccountToken,
      CRS_BATCH_SIZE: '4',
      CRS_LOAD_PARTITIONS: '2',
    });
    const s = await loadExportDay(
      { warehouse: tw.w, client: client(server.url).api, config, log },
      { target: closedDayLoad('long-keys-http', DAY) },
    );
    expect(s).toMatchObject({ inserted: 10, rejected: 6 });
    const ledger = await tw.w.pool.query('select status, rows_rejected from sync_days where day = $1', [DAY]);
    expect(ledger.rows).toEqual([{ status: 'complete', rows_rejected: 6 }]);
    await expectDayLoaded('long-keys-http', recs);
  });
});
