import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Lines that once failed a whole load (a reject whose `day` PostgreSQL refused, a record whose
 * jsonb PostgreSQL refused, a record too deep to encode) are quarantined, and every other line
 * loads; whitespace-only lines are blank; rejects count toward a batch's byte bound.
 */
const log = createLogger({ level: 'silent', pretty: false });
const dir = mkdtempSync(path.join(tmpdir(), 'crs-poison-'));
let n = 0;
function file(content: string): string {
  const p = path.join(dir, `f${n++}.jsonl`);
  writeFileSync(p, content);
  return p;
}
const deep = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
/** The source text of a record with `tail` (more keys) added. */
const withExtra = (rec: object, tail: string) => `${JSON.stringify(rec).slice(0, -1)},${tail}}`;

describe('poison lines through the loader', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'poison' });
  });
  afterAll(async () => {
    await tw?.dispose();
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await tw.w.pool.query('truncate analytics_messages, rejected_records, thread_queue');
  });

  const rejectsOf = async (loadId: string) =>
    (
      await tw.w.pool.query<{ line_no: string; error_code: string; day: string | null }>(
        `select line_no, error_code, day::text as day from rejected_records where _load_id = $1 order by line_no`,
        [loadId],
      )
    ).rows.map((r) => [Number(r.line_no), r.error_code, r.day]);
  const sourceLines = async (loadId: string) =>
    (
      await tw.w.pool.query<{ l: string }>(
        'select _source_line as l from analytics_messages where _load_id = $1 order by 1',
        [loadId],
      )
    ).rows.map((r) => Number(r.l));

  it('when a line has an impossible Message Time (2026-02-30), then it is quarantined with day null and every other line loads', async () => {
    const config = parseConfig({ CRS_BATCH_SIZE: '7', CRS_LOAD_PARTITIONS: '2' });
    const recs = makeRecords(20, { seed: 'feb30' });
    const lines: string[] = recs.map((r) => JSON.stringify(r));
    lines.splice(5, 0, JSON.stringify({ ...recs[0], 'Message Time': '2026-02-30T10:00:00Z' }));
    lines.splice(9, 0, JSON.stringify({ ...recs[1], 'Message Time': '0000-00-00T10:00:00Z' }));
    // Rejected for its id: its (valid) time still gives the UTC day.
    lines.splice(
      12,
      0,
      JSON.stringify({ ...recs[2], 'Message ID': 'x', 'Message Time': '2026-11-01T23:30:00-02:00' }),
    );
    const s = await importFile(tw.w, config, log, { file: file(toJsonl(lines)) });
    expect(s).toMatchObject({ rowsRead: 23, inserted: 20, rejected: 3 });
    expect(await rejectsOf(s.loadId)).toEqual([
      [6, 'impossible_date', null],
      [10, 'impossible_date', null],
      [13, 'invalid_uuid', '2026-11-02'],
    ]);
    expect((await sourceLines(s.loadId)).length).toBe(20);
  });

  it('when lines are nested 10,000 levels deep, hold 1e200000, an over-long key or too many keys, then each is quarantined under its code and the rest loads', async () => {
    const config = parseConfig({ CRS_BATCH_SIZE: '4', CRS_LOAD_PARTITIONS: '2' });
    const recs = makeRecords(12, { seed: 'deep' });
    const many = Array.from({ length: 10_001 }, (_, i) => `"k${i}":0`).join(',');
    const lines = [
      JSON.stringify(recs[0]),
      withExtra(recs[1]!, `"x":${deep(10_000)}`),
      JSON.stringify(recs[2]),
      withExtra(recs[3]!, '"n":1e200000'),
      withExtra(recs[4]!, '"ok":[1e400,1e-400,-0,123456789012345678901234567890]'),
      withExtra(recs[5]!, `"${'k'.repeat(5000)}":1`),
      withExtra(recs[6]!, many),
      withExtra(recs[7]!, `"m":{"n":1e-20000}`),
      ...recs.slice(8).map((r) => JSON.stringify(r)),
    ];
    const s = await importFile(tw.w, config, log, { file: file(toJsonl(lines)) });
    expect(s).toMatchObject({ rowsRead: 12, inserted: 7, rejected: 5 });
    expect((await rejectsOf(s.loadId)).map((r) => r.slice(0, 2))).toEqual([
      [2, 'nesting_too_deep'],
      [4, 'number_out_of_range'],
      [6, 'key_too_long'],
      [7, 'too_many_keys'],
      [8, 'number_out_of_range'],
    ]);
    expect(await sourceLines(s.loadId)).toEqual([1, 3, 5, 9, 10, 11, 12]);
    const kept = await tw.w.pool.query(
      `select extra = '{"ok":[1e400,1e-400,-0,123456789012345678901234567890]}'::jsonb as same
       from analytics_messages where _source_line = 5`,
    );
    expect(kept.rows).toEqual([{ same: true }]);
  });

  it('when lines hold only spaces, tabs or CRs, then they are blank lines, not rejects, and the line numbers after them are kept', async () => {
    const config = parseConfig({ CRS_BATCH_SIZE: '3', CRS_LOAD_PARTITIONS: '1' });
    const recs = makeRecords(4, { seed: 'ws' });
    const text = `${JSON.stringify(recs[0])}\n   \n\t\t\n \r \r\n${JSON.stringify(recs[1])}\n\n${JSON.stringify(recs[2])}\n \t\n${JSON.stringify(recs[3])}\n`;
    const s = await importFile(tw.w, config, log, { file: file(text) });
    expect(s).toMatchObject({ linesRead: 9, rowsRead: 4, inserted: 4, rejected: 0 });
    expect(await rejectsOf(s.loadId)).toEqual([]);
    expect(await sourceLines(s.loadId)).toEqual([1, 5, 7, 9]);
  });

  it('when a batch would hold many huge rejected lines, then each batch sends at most its byte bound of them', async () => {
    // One partition, batches of 1000 lines: before the bound, all 12 rejects (12 MB) went in one batch.
    const config = parseConfig({ CRS_BATCH_SIZE: '1000', CRS_LOAD_PARTITIONS: '1' });
    const huge = (i: number) => `{"Input": "${String(i).padEnd(1_000_000, 'x')}`; // unterminated: invalid_json
    const lines = [...Array.from({ length: 12 }, (_, i) => huge(i)), JSON.stringify(makeRecords(1)[0])];
    const sent: number[] = [];
    const query = pg.Client.prototype.query;
    vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (this: pg.Client, ...args: unknown[]) {
      const q = args[0] as { name?: string; values?: unknown[] };
      if (q?.name === 'crs_rejects') {
        sent.push((q.values![5] as string[]).reduce((sum, raw) => sum + raw.length, 0));
      }
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query);
    const s = await importFile(tw.w, config, log, { file: file(toJsonl(lines)) });
    expect(s).toMatchObject({ rowsRead: 13, inserted: 1, rejected: 12 });
    expect(sent.reduce((a, b) => a + b, 0)).toBe(12 * 1_000_011);
    // The sink's 2 MiB bound, crossed by at most the one line that reached it.
    for (const bytes of sent) expect(bytes).toBeLessThanOrEqual(2 * 1024 * 1024 + 1_000_011);
    expect(sent.length).toBeGreaterThanOrEqual(4);
  });
});
