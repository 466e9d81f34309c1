import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { parseRecord } from '../../src/ingest/parse/record-parser.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { makeRecords, toJsonl, uuidFrom } from '../helpers/export-lines.ts';
import { messageRows, tempFiles } from '../helpers/load-files.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

// The loader copies keys it did not find straight into analytics_messages. A writer that inserts
// one of those keys after the batch's lookup makes the COPY fail with a unique violation; the
// batch is then merged again through the stage, and the file's version must win.

const log = createLogger({ level: 'silent', pretty: false });
const file = tempFiles('crs-concurrent-');

const rowsOf = messageRows;

async function pollUntil<T>(what: string, probe: () => Promise<T | undefined>, limitMs = 60_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(25);
  }
}

describe('import with a concurrent writer', () => {
  let tw: TestWarehouse;
  let clean: TestWarehouse;
  const config = parseConfig({ CRS_BATCH_SIZE: '40', CRS_LOAD_PARTITIONS: '3' });
  beforeAll(async () => {
    [tw, clean] = await Promise.all([createTestWarehouse(), createTestWarehouse()]);
  });
  afterAll(async () => {
    await Promise.all([tw?.dispose(), clean?.dispose()]);
  });

  it('when another transaction inserts one of the file’s new keys and commits while the loader’s COPY waits on it, then the import succeeds and the row holds the file’s version', async () => {
    const recs = makeRecords(300, { seed: 'cw', day: '2026-09-14' });
    const text = toJsonl(recs);
    const target = recs[137]!;
    const parsed = parseRecord(JSON.stringify(target));
    if (!parsed.ok) throw new Error(parsed.detail);

    const other = new pg.Client({
      connectionString: tw.url,
      options: `-c search_path=${tw.schema},${tw.schema}_internal`,
    });
    await other.connect();
    let imported: ReturnType<typeof importFile> | undefined;
    try {
      await other.query('begin');
      await other.query(
        `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input,
           response, extra, record_hash, _source_line, _load_id, line_hash, response_chars)
         values ($1, $2, $3, '2026-09-14T01:02:03Z', '2026-09-14', 'the other writer''s input', 'theirs',
           '{"writer": "other"}', 'a hash that is not the file''s', 1, 'other-writer', 'not a line hash', 6)`,
        [target['Message ID'], uuidFrom('cw:other-thread'), uuidFrom('cw:other-user')],
      );
      const otherPid = (await other.query('select pg_backend_pid() as pid')).rows[0].pid as number;

      imported = importFile(tw.w, config, log, { file: file(text), loadId: 'concurrent-writer' });
      imported.catch(() => {}); // awaited below; not unhandled while the lock is polled

      // The loader's COPY of new keys reaches the uncommitted row and waits for its transaction.
      const waiter = await pollUntil('the loader COPY to wait on the other writer', async () => {
        const { rows } = await tw.w.pool.query(
          `select pid, query from pg_stat_activity
           where wait_event_type = 'Lock' and $1 = any(pg_blocking_pids(pid))`,
          [otherPid],
        );
        return rows[0] as { pid: number; query: string } | undefined;
      });
      expect(waiter.query.toLowerCase()).toMatch(/^copy analytics_messages \(/);
      await other.query('commit');
    } finally {
      await other.query('rollback').catch(() => {});
      await other.end();
    }

    const s = await imported!;
    expect(s).toMatchObject({ rowsRead: 300, rejected: 0 });
    // The other writer's row was there when the batch was merged again: an update, not an insert.
    expect(s.inserted + s.updated).toBe(300);
    expect(s.updated).toBe(1);

    const row = await tw.w.pool.query(
      `select record_hash, input, response, extra, thread_id::text, _load_id, _source_line::int as line,
              _deleted_at from analytics_messages where message_id = $1`,
      [target['Message ID']],
    );
    expect(row.rows).toEqual([
      {
        record_hash: parsed.record.recordHash,
        input: target.Input,
        response: target.Response,
        extra: null,
        thread_id: target['Thread ID'],
        _load_id: 'concurrent-writer',
        line: 138,
        _deleted_at: null,
      },
    ]);

    await importFile(clean.w, config, log, { file: file(text), loadId: 'clean' });
    const expected = await rowsOf(clean);
    expect(expected).toHaveLength(300);
    expect(await rowsOf(tw)).toEqual(expected);
    const dup = await tw.w.pool.query(
      'select count(*)::int as n, count(distinct message_id)::int as d from analytics_messages',
    );
    expect(dup.rows[0]).toEqual({ n: 300, d: 300 });
    const cp = await tw.w.pool.query(
      `select sum(rows_read)::int as r, sum(rows_inserted)::int as i, sum(rows_updated)::int as u,
              min(lines_committed)::int as c from load_checkpoints where load_key = 'concurrent-writer'`,
    );
    expect(cp.rows[0]).toEqual({ r: 300, i: 299, u: 1, c: 300 });
  });

  it('when the retried batch holds a line that only fails to parse inside the batch, then it is quarantined and counted once', async () => {
    const recs = makeRecords(60, { seed: 'cw-rej', day: '2026-09-15' });
    const target = recs[10]!;
    // A valid-looking message id routes the line unparsed (fast path); its thread id fails in the batch.
    const bad = JSON.stringify({ ...makeRecords(1, { seed: 'cw-rej-bad' })[0]!, 'Thread ID': 'not-a-uuid' });
    const lines = [...recs.slice(0, 20), bad, ...recs.slice(20)];
    const db = await createTestWarehouse();
    const other = new pg.Client({
      connectionString: db.url,
      options: `-c search_path=${db.schema},${db.schema}_internal`,
    });
    await other.connect();
    try {
      await other.query('begin');
      await other.query(
        `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input,
           response, record_hash, _source_line, _load_id, response_chars)
         values ($1, $2, $2, now(), '2026-09-15', 'x', 'y', 'other', 1, 'other-writer', 1)`,
        [target['Message ID'], uuidFrom('cw-rej:other')],
      );
      const otherPid = (await other.query('select pg_backend_pid() as pid')).rows[0].pid as number;
      // One partition and one batch: the bad line is in the batch that is retried.
      const one = parseConfig({ CRS_BATCH_SIZE: '1000', CRS_LOAD_PARTITIONS: '1' });
      const imported = importFile(db.w, one, log, { file: file(toJsonl(lines)), loadId: 'retried-reject' });
      imported.catch(() => {});
      await pollUntil('the loader COPY to wait on the other writer', async () => {
        const { rows } = await db.w.pool.query(
          `select pid from pg_stat_activity where wait_event_type = 'Lock' and $1 = any(pg_blocking_pids(pid))`,
          [otherPid],
        );
        return rows[0] as { pid: number } | undefined;
      });
      await other.query('commit');
      const s = await imported;
      const rej = await db.w.pool.query(
        `select line_no::int, error_code from rejected_records where _load_id = 'retried-reject'`,
      );
      expect(rej.rows).toEqual([{ line_no: 21, error_code: 'invalid_uuid' }]);
      const cp = await db.w.pool.query(
        `select rows_read::int as r, rows_rejected::int as j from load_checkpoints where load_key = 'retried-reject'`,
      );
      expect(cp.rows).toEqual([{ r: 61, j: 1 }]);
      expect(s).toMatchObject({ rowsRead: 61, inserted: 59, updated: 1, rejected: 1 });
    } finally {
      await other.query('rollback').catch(() => {});
      await other.end();
      await db.dispose();
    }
  });

  it('when the same file is imported twice at the same time into one schema, then both succeed and the table equals a clean load', async () => {
    const recs = makeRecords(1200, { seed: 'twin', day: '2026-09-16' });
    const text = toJsonl(recs);
    const db = await createTestWarehouse();
    const cleanDb = await createTestWarehouse();
    try {
      const f = file(text);
      const [a, b] = await Promise.all([
        importFile(db.w, config, log, { file: f, loadId: 'twin-a' }),
        importFile(db.w, config, log, { file: f, loadId: 'twin-b' }),
      ]);
      expect(a.loadId).not.toBe(b.loadId);
      for (const s of [a, b]) expect(s).toMatchObject({ rowsRead: 1200, updated: 0, rejected: 0 });
      // Every key is inserted by exactly one of them; the other finds it unchanged.
      expect(a.inserted + b.inserted).toBe(1200);
      expect(a.unchanged + b.unchanged).toBe(1200);

      await importFile(cleanDb.w, config, log, { file: file(text), loadId: 'clean' });
      const expected = await messageRows(cleanDb);
      const got = await messageRows(db);
      expect(got).toHaveLength(1200);
      expect(got).toEqual(expected);
      const runs = await db.w.pool.query(
        `select load_id, status from sync_runs where load_id in ('twin-a', 'twin-b') order by load_id`,
      );
      expect(runs.rows).toEqual([
        { load_id: 'twin-a', status: 'succeeded' },
        { load_id: 'twin-b', status: 'succeeded' },
      ]);
    } finally {
      await Promise.all([db.dispose(), cleanDb.dispose()]);
    }
  });
});
