import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pseudonymOf, storedUserIds } from '../../src/common/pseudonym.ts';
import { parseConfig } from '../../src/config.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { forget } from '../../src/warehouse/privacy/forget.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { tempFiles } from '../helpers/load-files.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

// CRS_USER_ID_POLICY=pseudonymize as a data team meets it: no plain user id anywhere, the same
// pseudonym in every table and load (so users still count and join), a re-load unchanged, a
// warehouse never mixing plain ids and pseudonyms or two keys, and `forget --user` taking the
// plain id.

const log = createLogger({ level: 'silent', pretty: false });
const file = tempFiles('crs-pseudonym-');
const KEY = 'k'.repeat(16) + '0123456789abcdef0123';
const pseudo = parseConfig({
  CRS_BATCH_SIZE: '9',
  CRS_LOAD_PARTITIONS: '2',
  CRS_USER_ID_POLICY: 'pseudonymize',
  CRS_PSEUDONYM_KEY: KEY,
});
const records = makeRecords(45, { seed: 'pseudonym', threads: 6 });
const users = [...new Set(records.map((r) => r['User ID']))];
let tw: TestWarehouse;
let path: string;

async function mentionsAny(ids: string[]): Promise<number> {
  const tables = await tw.w.pool.query<{ s: string; t: string }>(
    `select table_schema as s, table_name as t from information_schema.tables
      where table_schema in ($1::text, $1::text || '_internal') and table_type = 'BASE TABLE'`,
    [tw.schema],
  );
  let n = 0;
  for (const { s, t } of tables.rows) {
    const r = await tw.w.pool.query<{ n: number }>(
      `select count(*)::int as n from ${s}.${t} x where lower(x::text) ~ $1`,
      [ids.map((i) => i.toLowerCase()).join('|')],
    );
    n += r.rows[0]?.n ?? 0;
  }
  return n;
}

beforeAll(async () => {
  tw = await createTestWarehouse();
  path = file(toJsonl(records));
});
afterAll(async () => {
  await tw?.dispose();
});

describe('pseudonymous user ids', () => {
  it('when a warehouse is loaded with pseudonymize, then no plain user id is stored and each user has one pseudonym everywhere', async () => {
    const s = await importFile(tw.w, pseudo, log, { file: path });
    expect(s.inserted).toBe(records.length);
    expect(await mentionsAny(users)).toBe(0);
    const stored = await tw.w.pool.query<{ user_id: string; n: number }>(
      'select user_id::text, count(*)::int as n from analytics_messages group by 1 order by 1',
    );
    const expected = users
      .map((u) => ({ user_id: pseudonymOf(KEY, u), n: records.filter((r) => r['User ID'] === u).length }))
      .sort((a, b) => (a.user_id < b.user_id ? -1 : 1));
    expect(stored.rows).toEqual(expected);
    const threads = await tw.w.pool.query<{ n: number }>(
      'select count(*)::int as n from threads t where not exists (select 1 from analytics_messages a where a.user_id = t.user_id)',
    );
    expect(threads.rows[0]!.n).toBe(0);
  });

  it('when the same file is loaded again, then every line is unchanged', async () => {
    const s = await importFile(tw.w, pseudo, log, { file: path, loadId: 'again' });
    expect(s).toMatchObject({ rowsRead: records.length, unchanged: records.length, inserted: 0, updated: 0 });
  });

  it('when a load asks for plain ids or another key, then it is refused and writes nothing', async () => {
    const plain = parseConfig({ CRS_BATCH_SIZE: '9' });
    await expect(importFile(tw.w, plain, log, { file: path, loadId: 'plain' })).rejects.toThrow(
      /CRS_USER_ID_POLICY=keep, but this warehouse stores user ids as pseudonyms/,
    );
    const other = parseConfig({ CRS_USER_ID_POLICY: 'pseudonymize', CRS_PSEUDONYM_KEY: 'x'.repeat(40) });
    await expect(importFile(tw.w, other, log, { file: path, loadId: 'other-key' })).rejects.toThrow(
      /CRS_PSEUDONYM_KEY is not the key this warehouse's pseudonyms were made with/,
    );
    expect(await mentionsAny(users)).toBe(0);
    expect((await tw.w.pool.query('select count(*)::int as n from analytics_messages')).rows[0].n).toBe(
      records.length,
    );
  });

  it('when a warehouse holding plain ids is asked to pseudonymize, then it is refused', async () => {
    const plainWh = await createTestWarehouse();
    try {
      await importFile(plainWh.w, parseConfig({}), log, { file: path });
      await expect(importFile(plainWh.w, pseudo, log, { file: path, loadId: 'switch' })).rejects.toThrow(
        /CRS_USER_ID_POLICY=pseudonymize, but this warehouse stores user ids as sent/,
      );
    } finally {
      await plainWh.dispose();
    }
  });

  it('when a user is forgotten by their plain id, then their pseudonymous rows go and a re-load suppresses them', async () => {
    const user = users[0]!;
    const r = await forget(
      tw.w.pool,
      { users: [user], threads: [] },
      { storedUserId: storedUserIds(pseudo.userIds) },
    );
    const theirs = records.filter((x) => x['User ID'] === user).length;
    expect(r.rows.analytics_messages).toBe(theirs);
    expect(await mentionsAny([pseudonymOf(KEY, user)])).toBe(0);
    const s = await importFile(tw.w, pseudo, log, { file: path, loadId: 'after' });
    expect(s.suppressed).toBe(theirs);
    expect(await mentionsAny([pseudonymOf(KEY, user), user])).toBe(0);
  });

  it('when an over-long line is quarantined under pseudonymize, then its reject keeps the pseudonym, and forget by the plain id removes it and suppresses the line after', async () => {
    const [rec] = makeRecords(1, { seed: 'pseudonym-overlong' });
    const user = rec!['User ID'];
    const id = rec!['Message ID'];
    // Input first: the ids lie beyond the 64 KiB the quarantine keeps of an over-long line.
    const line = JSON.stringify({ ...rec, Input: 'long words '.repeat(10_000) });
    expect(line.indexOf(user)).toBeGreaterThan(64 * 1024);
    const limited = parseConfig({
      CRS_BATCH_SIZE: '9',
      CRS_USER_ID_POLICY: 'pseudonymize',
      CRS_PSEUDONYM_KEY: KEY,
      CRS_MAX_LINE_BYTES: '70000',
    });
    const longFile = file(toJsonl([line]));
    const s = await importFile(tw.w, limited, log, { file: longFile, loadId: 'overlong' });
    expect(s).toMatchObject({ rejected: 1, suppressed: 0 });
    const kept = await tw.w.pool.query<{ user_id: string; thread_id: string }>(
      'select user_id::text, thread_id::text from rejected_records where message_id = $1',
      [id],
    );
    expect(kept.rows).toEqual([{ user_id: pseudonymOf(KEY, user), thread_id: rec!['Thread ID'] }]);
    const r = await forget(
      tw.w.pool,
      { users: [user], threads: [] },
      { storedUserId: storedUserIds(pseudo.userIds) },
    );
    expect(r.rows.rejected_records).toBe(1);
    expect(await mentionsAny([pseudonymOf(KEY, user), user, id, rec!['Thread ID']])).toBe(0);
    const again = await importFile(tw.w, limited, log, { file: longFile, loadId: 'overlong-after' });
    expect(again).toMatchObject({ rejected: 0, suppressed: 1 });
    expect(await mentionsAny([pseudonymOf(KEY, user), user, id])).toBe(0);
  });

  it('when pseudonymize is set without a key, then the configuration is refused', () => {
    expect(() => parseConfig({ CRS_USER_ID_POLICY: 'pseudonymize' })).toThrow(/CRS_PSEUDONYM_KEY: required/);
    expect(() => parseConfig({ CRS_USER_ID_POLICY: 'pseudonymize', CRS_PSEUDONYM_KEY: 'short' })).toThrow(
      /at least 32 characters/,
    );
  });
});
