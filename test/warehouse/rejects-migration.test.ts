import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDayLoad } from '../../src/common/load-target.ts';
import { runLoad } from '../../src/ingest/merge/load.ts';
import { rejectDigest } from '../../src/ingest/merge/pending.ts';
import { createLogger } from '../../src/log.ts';
import { migrateToLatest } from '../../src/warehouse/migrator.ts';
import { createTestWarehouse, migrateToBefore, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The migration to one open reject per line, over a quarantine as the release before it left
 * it: a row per load and line. Rows are inserted as that release's loader wrote them, then the
 * schema is brought up to date, and a load of the new release reads one of the lines again.
 */
const MIGRATION = '2026-11-28T14-00-00_rejects_one_per_line';
const DAY = '2026-11-10';

let tw: TestWarehouse;

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'rejmig', migrate: false });
  await migrateToBefore(tw, MIGRATION);
});

afterAll(async () => {
  await tw?.dispose();
});

const badLine = `{"Message ID": "3f1d2c4b-5a69-4e7d-8c1b-2a3e4f5a6b7c", "Message Time": "${DAY}T08:00:00Z", "Input": "cut`;
const nulLine = Buffer.from(`{"Input": "a\u0000b", "Message Time": "${DAY}T09:00:00Z"}`, 'utf8');
const longPrefix = Buffer.from(`{"Input": "${'x'.repeat(200)}`, 'utf8');

/** A row as the release before wrote it (columns it knew). */
function oldRow(loadId: string, lineNo: number, receivedAt: string, over: Record<string, unknown> = {}) {
  return {
    _load_id: loadId,
    source: 'export',
    source_name: `export:${DAY}`,
    day: DAY,
    line_no: lineNo,
    raw: badLine,
    raw_bytes: null,
    raw_length: Buffer.byteLength(badLine),
    error_code: 'invalid_json',
    error_detail: `detail of ${loadId}`,
    received_at: receivedAt,
    message_id: '3f1d2c4b-5a69-4e7d-8c1b-2a3e4f5a6b7c',
    ...over,
  };
}

describe('the migration to one open reject per line', () => {
  it('when the quarantine holds a line once per load, then the open rows of each line become one (the oldest kept, the loads counted, the last noted), and the next load of the line counts on it', async () => {
    const rows = [
      // Replayed before the migration: history, left alone.
      oldRow('pull-0', 3, '2026-11-10T01:00:00Z', { replayed_at: '2026-11-10T01:30:00Z' }),
      oldRow('pull-1', 4, '2026-11-10T02:00:00Z'),
      oldRow('pull-2', 6, '2026-11-10T03:00:00Z'),
      oldRow('pull-3', 9, '2026-11-10T04:00:00Z', { error_detail: 'the latest detail' }),
      // A file import of the same bytes: another source, its own reject.
      oldRow('import-a', 2, '2026-11-10T05:00:00Z', { source: 'file', source_name: '/data/a.jsonl' }),
      // Exact bytes kept (a NUL): the digest is of raw_bytes.
      oldRow('pull-1', 7, '2026-11-10T02:00:00Z', {
        raw: nulLine.toString('utf8').replaceAll('\u0000', '\\u0000'),
        raw_bytes: nulLine,
        raw_length: nulLine.length,
        error_code: 'nul_character',
        message_id: null,
      }),
      oldRow('pull-2', 8, '2026-11-10T03:00:00Z', {
        raw: nulLine.toString('utf8').replaceAll('\u0000', '\\u0000'),
        raw_bytes: nulLine,
        raw_length: nulLine.length,
        error_code: 'nul_character',
        message_id: null,
      }),
      // An over-long line: a prefix and the whole length.
      oldRow('pull-1', 11, '2026-11-10T02:00:00Z', {
        raw: longPrefix.toString('utf8'),
        raw_bytes: longPrefix,
        raw_length: 5_000_000,
        error_code: 'line_too_long',
      }),
      // A history entry: not a line, not merged.
      {
        ...oldRow('enrich-1', 0, '2026-11-10T02:00:00Z'),
        source: 'history',
        source_name: 'thread/x',
        day: null,
        message_id: null,
      },
      {
        ...oldRow('enrich-2', 0, '2026-11-10T03:00:00Z'),
        source: 'history',
        source_name: 'thread/x',
        day: null,
        message_id: null,
      },
    ];
    for (const r of rows) {
      const cols = Object.keys(r);
      await tw.w.pool.query(
        `insert into rejected_records (${cols.join(', ')}) values (${cols.map((_, i) => `$${i + 1}`).join(', ')})`,
        Object.values(r),
      );
    }
    // An import whose load was cut short before the upgrade: its rejects are counted on their day.
    await tw.w.pool.query(
      `insert into load_checkpoints (load_key, part, parts) values ('import-a', 0, 2), ('import-a', 1, 2)`,
    );

    await migrateToLatest(tw.w);

    const after = await tw.w.pool.query(
      `select id::int, source, error_code, _load_id, line_no::int, last_load_id, times_seen::int,
              to_char(last_seen_at at time zone 'UTC', 'HH24:MI') as last_seen, error_detail,
              replayed_at is not null as replayed, line_digest
       from rejected_records order by id`,
    );
    const digest = rejectDigest(Buffer.from(badLine));
    expect(
      after.rows.map(({ line_digest, ...r }) => ({ ...r, digest: line_digest?.toString('hex') ?? null })),
    ).toEqual([
      {
        id: 1,
        source: 'export',
        error_code: 'invalid_json',
        _load_id: 'pull-0',
        line_no: 3,
        last_load_id: 'pull-0',
        times_seen: 1,
        last_seen: '01:00',
        error_detail: 'detail of pull-0',
        replayed: true,
        digest: digest.toString('hex'),
      },
      {
        id: 2,
        source: 'export',
        error_code: 'invalid_json',
        _load_id: 'pull-1',
        line_no: 4,
        last_load_id: 'pull-3',
        times_seen: 3,
        last_seen: '04:00',
        error_detail: 'the latest detail',
        replayed: false,
        digest: digest.toString('hex'),
      },
      {
        id: 5,
        source: 'file',
        error_code: 'invalid_json',
        _load_id: 'import-a',
        line_no: 2,
        last_load_id: 'import-a',
        times_seen: 1,
        last_seen: '05:00',
        error_detail: 'detail of import-a',
        replayed: false,
        digest: digest.toString('hex'),
      },
      {
        id: 6,
        source: 'export',
        error_code: 'nul_character',
        _load_id: 'pull-1',
        line_no: 7,
        last_load_id: 'pull-2',
        times_seen: 2,
        last_seen: '03:00',
        error_detail: 'detail of pull-2',
        replayed: false,
        digest: rejectDigest(nulLine).toString('hex'),
      },
      {
        id: 8,
        source: 'export',
        error_code: 'line_too_long',
        _load_id: 'pull-1',
        line_no: 11,
        last_load_id: 'pull-1',
        times_seen: 1,
        last_seen: '02:00',
        error_detail: 'detail of pull-1',
        replayed: false,
        digest: rejectDigest(longPrefix, {
          length: 5_000_000,
          messageId: '3f1d2c4b-5a69-4e7d-8c1b-2a3e4f5a6b7c',
        }).toString('hex'),
      },
      ...[9, 10].map((id) => ({
        id,
        source: 'history',
        error_code: 'invalid_json',
        _load_id: `enrich-${id - 8}`,
        line_no: 0,
        last_load_id: `enrich-${id - 8}`,
        times_seen: 1,
        last_seen: `0${id - 7}:00`,
        error_detail: `detail of enrich-${id - 8}`,
        replayed: false,
        digest: null,
      })),
    ]);
    const counted = await tw.w.pool.query(
      `select load_key, part, day::text, rows_rejected::int from load_day_counts order by load_key, part`,
    );
    expect(counted.rows).toEqual([{ load_key: 'import-a', part: 0, day: DAY, rows_rejected: 1 }]);

    // The release after it reads the line again: the same reject, one more load.
    const s = await runLoad({
      warehouse: tw.w,
      log: createLogger({ level: 'silent', pretty: false }),
      target: openDayLoad('pull-4', DAY),
      open: async () => Readable.from([Buffer.from(`${badLine}\n`)]),
      batchSize: 10,
      parts: 1,
      maxLineBytes: 1 << 20,
    });
    expect(s.rejected).toBe(1);
    const open = await tw.w.pool.query(
      `select id::int, times_seen::int, last_load_id from rejected_records
       where source = 'export' and error_code = 'invalid_json' and replayed_at is null`,
    );
    expect(open.rows).toEqual([{ id: 2, times_seen: 4, last_load_id: 'pull-4' }]);
  });
});
