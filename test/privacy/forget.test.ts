import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tablesNaming } from '../../bench/lib/chaos/erased.ts';
import { parseConfig } from '../../src/config.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { type PageRows, writePageRows } from '../../src/warehouse/enrich-pages.ts';
import { forget, listErasures } from '../../src/warehouse/privacy/forget.ts';
import { Suppression } from '../../src/warehouse/privacy/suppression.ts';
import { rebuildRollups } from '../../src/warehouse/rollups/rebuild.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import { makeRecords, toJsonl, uuidFrom } from '../helpers/export-lines.ts';
import { tempFiles } from '../helpers/load-files.ts';
import { rollupRows } from '../helpers/rollups.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

// `crs-sync forget` as a privacy office would check it: after the erasure no table of the schema
// (data, bookkeeping, quarantine, rollups) holds the person's id in any column, the rollups equal
// a rebuild from the raw tables, and what is kept about the erasure never holds the plain id.

const log = createLogger({ level: 'silent', pretty: false });
const file = tempFiles('crs-forget-');
const config = parseConfig({ CRS_BATCH_SIZE: '13', CRS_LOAD_PARTITIONS: '2' });

let tw: TestWarehouse;
const records = makeRecords(90, { seed: 'forget', threads: 7 });
const user = records[0]!['User ID'];
const otherUser = records[1]!['User ID'];
const userThreads = [...new Set(records.filter((r) => r['User ID'] === user).map((r) => r['Thread ID']))];
// The thread of another user that the in-flight test erases alone.
const raceThread = records.find((r) => r['User ID'] === otherUser)!['Thread ID'];
const forgottenThreads = new Set([...userThreads, raceThread]);

/** Rows of every table of the schema and its internal one that name `id` (any case, any column), by table. */
async function mentions(id: string): Promise<Record<string, number>> {
  return (await tablesNaming(tw.w.pool, tw.schema, [id])).get(id.toLowerCase()) ?? {};
}

async function count(sql: string, values: unknown[] = []): Promise<number> {
  return (await tw.w.pool.query<{ n: number }>(`select (${sql})::int as n`, values)).rows[0]!.n;
}

beforeAll(async () => {
  tw = await createTestWarehouse();
  // A rejected line that names the user (its time is not a time), among the records.
  const bad = JSON.stringify({
    ...records[0],
    'Message ID': uuidFrom('forget:bad'),
    'Message Time': 'yesterday',
  });
  await importFile(tw.w, config, log, { file: file(toJsonl([...records, bad])) });
  // Enrichment's rows for one of the user's threads and one of another user's.
  const other = records.find((r) => r['User ID'] === otherUser)!['Thread ID'];
  for (const [i, t] of [userThreads[0]!, other].entries()) {
    const m = uuidFrom(`forget:h:${i}`);
    await tw.w.pool.query(
      `insert into thread_messages (message_id, thread_id, position, role, text, raw) values ($1, $2, 0, 'user', 'hello', '{}')`,
      [m, t],
    );
    await tw.w.pool.query(
      `insert into citations (owner_kind, owner_id, ordinal, message_id, thread_id, summary, extra)
       values ('message', $1, 0, $3, $2, 'a source', '{}')`,
      [m, t, m],
    );
    await tw.w.pool.query(
      `insert into artifacts (artifact_id, thread_id, message_id, val, val_json, raw, fetched_via)
       values ($1, $2, $3, 'chart', null, '{}', 'v2')`,
      [uuidFrom(`forget:a:${i}`), t, m],
    );
  }
  await refreshRollups(tw.w.pool);
});
afterAll(async () => {
  await tw?.dispose();
});

describe('crs-sync forget', () => {
  it('when a line is quarantined, then its reject keeps the user and thread ids it names', async () => {
    const r = await tw.w.pool.query<{ user_id: string; thread_id: string }>(
      'select user_id::text, thread_id::text from rejected_records where message_id = $1',
      [uuidFrom('forget:bad')],
    );
    expect(r.rows).toEqual([{ user_id: user, thread_id: records[0]!['Thread ID'] }]);
  });

  it('when a dry run names a user, then it counts their rows and erases nothing', async () => {
    const before = await mentions(user);
    expect(before.analytics_messages).toBe(records.filter((r) => r['User ID'] === user).length);
    expect(before.rejected_records).toBe(1);
    const r = await forget(tw.w.pool, { users: [user.toUpperCase()], threads: [] }, { dryRun: true });
    expect(r.dryRun).toBe(true);
    expect(r.rows.analytics_messages).toBe(before.analytics_messages);
    expect(r.rows.thread_messages).toBe(1);
    expect(r.rows.citations).toBe(1);
    expect(r.rows.artifacts).toBe(1);
    expect(r.rows.threads).toBe(userThreads.length);
    expect(r.rows.rejected_records).toBe(1);
    expect(r.threads).toBe(userThreads.length);
    expect(await mentions(user)).toEqual(before);
    expect(await listErasures(tw.w.pool)).toEqual([]);
  });

  it('when a user is forgotten, then no table holds their id, the rollups equal a rebuild and others are kept', async () => {
    const othersBefore = await count(`select count(*) from analytics_messages where user_id <> $1`, [user]);
    const dry = await forget(tw.w.pool, { users: [user], threads: [] }, { dryRun: true });
    const r = await forget(tw.w.pool, { users: [user], threads: [] }, { reason: 'DSR-1' });
    expect(r.dryRun).toBe(false);
    expect(r.rows).toEqual(dry.rows);
    expect(r.rollups.days).toBeGreaterThan(0);
    expect(await mentions(user)).toEqual({});
    for (const t of userThreads) expect(await mentions(t)).toEqual({});
    expect(await count(`select count(*) from analytics_messages`)).toBe(othersBefore);
    expect(await count(`select count(*) from thread_messages`)).toBe(1);
    // The rollups, as the erasure left them, against a full rebuild from what is left.
    const refreshed = await rollupRows(tw);
    await rebuildRollups(tw.w.pool, null);
    expect(await rollupRows(tw)).toEqual(refreshed);
  });

  it('when the erasures are listed, then they say when, why and how many, and never the id', async () => {
    const list = await listErasures(tw.w.pool);
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ reason: 'DSR-1', users: 1, threads: userThreads.length });
    expect(JSON.stringify(list).toLowerCase()).not.toContain(user.toLowerCase());
    expect(await mentions(user)).toEqual({});
  });

  it('when the suppression list is read, then it drops the user and their threads in any case, and no one else', async () => {
    const c = await tw.w.pool.connect();
    try {
      await c.query('begin');
      const s = await Suppression.read(c);
      expect(s.size).toBe(1 + userThreads.length);
      expect(s.has('user', user.toUpperCase())).toBe(true);
      expect(s.drops(otherUser, userThreads[0])).toBe(true);
      expect(s.drops(otherUser, records.find((r) => r['User ID'] === otherUser)!['Thread ID'])).toBe(false);
      expect(s.has('thread', user)).toBe(false);
      // Unchanged list, same object: a writer does not read it again per transaction.
      expect(await Suppression.read(c, s)).toBe(s);
    } finally {
      await c.query('rollback');
      c.release();
    }
  });

  it('when an id is not a UUID, then nothing is erased and the message does not repeat it', async () => {
    await expect(forget(tw.w.pool, { users: ['alice@example.com'], threads: [] })).rejects.toThrow(
      /--user takes UUIDs; argument 1 is not one/,
    );
    await expect(forget(tw.w.pool, { users: ['alice@example.com'], threads: [] })).rejects.not.toThrow(
      /alice/,
    );
    expect(await listErasures(tw.w.pool)).toHaveLength(1);
  });

  it('when an enrichment page is in flight as its thread is forgotten, then the erasure waits for it and leaves nothing; a later page writes nothing', async () => {
    const thread = raceThread;
    const page = (n: number): PageRows => ({
      heads: [
        {
          thread_id: thread,
          next_index: n + 1,
          finish: false,
          status: null,
          requested_at: null,
          has_name: false,
          name: null,
          error: null,
          from_index: null,
          to_end: false,
          rewrite: false,
        },
      ],
      messages: [
        {
          message_id: uuidFrom(`forget:late:${n}`),
          thread_id: thread,
          position: n,
          role: 'assistant',
          text: 'late words',
          created_at: null,
          is_cancelled: false,
          raw: {},
          load_id: 'enrich-late',
        },
      ],
      artifacts: [],
      owners: [],
      citations: [],
      rejects: [],
    });
    const a = await tw.w.pool.connect();
    let erasure: Promise<unknown> | undefined;
    try {
      await a.query('begin');
      const pagePid = (await a.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
      await writePageRows(a, page(7));
      erasure = forget(tw.w.pool, { users: [], threads: [thread] }, { reason: 'race' });
      // Until the erasure waits on the page's row lock (not on a clock).
      for (;;) {
        // Blocked by the page's session, on the statement that deletes the threads.
        const w = await tw.w.pool.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity
            where $1 = any(pg_blocking_pids(pid)) and query like '%delete from threads%'`,
          [pagePid],
        );
        if (w.rows[0]!.n > 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      await a.query('commit');
    } finally {
      a.release();
    }
    await erasure;
    expect(await mentions(thread)).toEqual({});
    await writePageRows(tw.w.pool, page(8));
    expect(await mentions(thread)).toEqual({});
    expect(await count(`select count(*) from thread_messages where _load_id = 'enrich-late'`)).toBe(0);
  });

  it('when the same lines are loaded again after the erasure, then the erased user and threads are suppressed, not written, and counted', async () => {
    // Declared complete, so that the day ledger holds its figures (and the delete step runs).
    const again = await importFile(tw.w, config, log, {
      file: file(toJsonl(records)),
      loadId: 'after-forget',
      wholeDays: { from: '2026-11-01', to: '2026-11-03' },
    });
    const erased = records.filter(
      (r) => r['User ID'] === user || forgottenThreads.has(r['Thread ID']),
    ).length;
    expect(erased).toBeGreaterThan(0);
    expect(again.suppressed).toBe(erased);
    expect(again.rowsRead).toBe(records.length);
    expect(again.inserted + again.updated + again.unchanged + again.rejected + again.suppressed).toBe(
      again.rowsRead,
    );
    expect(await mentions(user)).toEqual({});
    for (const t of forgottenThreads) expect(await mentions(t)).toEqual({});
    const run = await tw.w.pool.query<{ n: number }>(
      `select rows_suppressed::int as n from sync_runs where load_id = 'after-forget'`,
    );
    expect(run.rows[0]?.n).toBe(erased);
    const days = await tw.w.pool.query<{ n: number; deleted: number }>(
      'select sum(rows_suppressed)::int as n, sum(rows_deleted)::int as deleted from sync_days',
    );
    // Suppressed lines are neither deletes nor missing rows: the delete step deletes nothing.
    expect(days.rows[0]).toEqual({ n: erased, deleted: 0 });
    expect(again.deleted).toBe(0);
  });

  it('when a quarantined line names an erased user, then it is suppressed, not quarantined', async () => {
    const bad = JSON.stringify({
      ...records[0],
      'Message ID': uuidFrom('forget:bad2'),
      'Message Time': 'not a time',
    });
    const s = await importFile(tw.w, config, log, { file: file(toJsonl([bad])), loadId: 'bad-after-forget' });
    expect(s).toMatchObject({ rowsRead: 1, rejected: 0, suppressed: 1 });
    expect(await mentions(user)).toEqual({});
  });

  it('when an over-long line of an erased user is loaded, its ids beyond the kept prefix, then it is suppressed, and its message id is in no table', async () => {
    const id = uuidFrom('forget:long');
    // Input first: the ids lie beyond the 64 KiB the quarantine keeps of an over-long line.
    const long = JSON.stringify({ ...records[0], 'Message ID': id, Input: 'long words '.repeat(10_000) });
    expect(long.indexOf(user)).toBeGreaterThan(64 * 1024);
    const limited = parseConfig({
      CRS_BATCH_SIZE: '13',
      CRS_LOAD_PARTITIONS: '2',
      CRS_MAX_LINE_BYTES: '70000',
    });
    const s = await importFile(tw.w, limited, log, {
      file: file(toJsonl([long])),
      loadId: 'long-after-forget',
    });
    expect(s).toMatchObject({ rowsRead: 1, rejected: 0, suppressed: 1 });
    expect(await mentions(id)).toEqual({});
    expect(await mentions(user)).toEqual({});
  });

  // Quarantined before the erasure: the reject keeps 64 KiB of the line, its ids beyond it; the
  // erasure finds it by the ids the loader read from the whole line.
  for (const by of ['user', 'thread'] as const) {
    it(`when an over-long line was quarantined before its ${by} is forgotten, its ids beyond the kept prefix, then the erasure removes it and no table names them`, async () => {
      const [rec] = makeRecords(1, { seed: `forget-overlong-${by}` });
      const id = uuidFrom(`forget:overlong:${by}`);
      const long = JSON.stringify({ ...rec, 'Message ID': id, Input: 'long words '.repeat(10_000) });
      // Upper-case ids in the line: the erasure matches them in any case.
      const line = long.replace(rec!['User ID'], rec!['User ID'].toUpperCase());
      expect(line.toLowerCase().indexOf(rec!['User ID'])).toBeGreaterThan(64 * 1024);
      expect(line.indexOf(rec!['Thread ID'])).toBeGreaterThan(64 * 1024);
      expect(line.indexOf(id)).toBeGreaterThan(64 * 1024);
      const limited = parseConfig({
        CRS_BATCH_SIZE: '13',
        CRS_LOAD_PARTITIONS: '2',
        CRS_MAX_LINE_BYTES: '70000',
      });
      const s = await importFile(tw.w, limited, log, {
        file: file(toJsonl([line])),
        loadId: `overlong-before-forget-${by}`,
      });
      expect(s).toMatchObject({ rowsRead: 1, rejected: 1, suppressed: 0 });
      expect(await count('select count(*) from rejected_records where message_id = $1', [id])).toBe(1);
      const target =
        by === 'user'
          ? { users: [rec!['User ID']], threads: [] }
          : { users: [], threads: [rec!['Thread ID']] };
      const r = await forget(tw.w.pool, target, { reason: `overlong-${by}` });
      expect(r.rows.rejected_records).toBe(1);
      expect(await count('select count(*) from rejected_records where message_id = $1', [id])).toBe(0);
      const erased = by === 'user' ? [rec!['User ID'], rec!['Thread ID'], id] : [rec!['Thread ID'], id];
      for (const x of erased) expect(await mentions(x), x).toEqual({});
    });
  }

  it('when an over-long reject without ids (quarantined before they were kept) is read again by a load, then it gets them and forget finds it', async () => {
    const [rec] = makeRecords(1, { seed: 'forget-overlong-old' });
    const id = rec!['Message ID'];
    const line = JSON.stringify({ ...rec, Input: 'long words '.repeat(10_000) });
    const limited = parseConfig({
      CRS_BATCH_SIZE: '13',
      CRS_LOAD_PARTITIONS: '2',
      CRS_MAX_LINE_BYTES: '70000',
    });
    const path = file(toJsonl([line]));
    await importFile(tw.w, limited, log, { file: path, loadId: 'overlong-old-1' });
    // As the migration leaves a row quarantined before it: no ids beyond the message id.
    await tw.w.pool.query(
      'update rejected_records set user_id = null, thread_id = null where message_id = $1',
      [id],
    );
    const blind = await forget(tw.w.pool, { users: [rec!['User ID']], threads: [] }, { dryRun: true });
    expect(blind.rows.rejected_records).toBe(0);
    await importFile(tw.w, limited, log, { file: path, loadId: 'overlong-old-2' });
    expect(
      await count(
        'select count(*) from rejected_records where message_id = $1 and times_seen = 2 and user_id = $2',
        [id, rec!['User ID']],
      ),
    ).toBe(1);
    const r = await forget(tw.w.pool, { users: [rec!['User ID']], threads: [] }, { reason: 'overlong-old' });
    expect(r.rows.rejected_records).toBe(1);
    for (const x of [rec!['User ID'], rec!['Thread ID'], id]) expect(await mentions(x), x).toEqual({});
  });

  it('when a user is forgotten while a load of their lines runs, then no row of them is left', async () => {
    const big = makeRecords(3000, { seed: 'forget-race', threads: 40 });
    const victim = big[0]!['User ID'];
    const small = parseConfig({ CRS_BATCH_SIZE: '20', CRS_LOAD_PARTITIONS: '2' });
    let done = false;
    const load = importFile(tw.w, small, log, { file: file(toJsonl(big)), loadId: 'race-load' }).finally(
      () => {
        done = true;
      },
    );
    // Once the load has committed some of the victim's rows (progress, not a clock).
    while ((await count('select count(*) from analytics_messages where user_id = $1', [victim])) === 0) {
      if (done) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    await forget(tw.w.pool, { users: [victim], threads: [] }, { reason: 'race' });
    const loadStillRan = !done;
    const s = await load;
    console.log(
      `forget during a load: the load was ${loadStillRan ? 'still running' : 'done'} when the erasure committed`,
    );
    expect(await mentions(victim)).toEqual({});
    const theirs = big.filter((r) => r['User ID'] === victim).length;
    // Each of their lines was either written before the erasure (and erased by it) or suppressed.
    expect(s.suppressed).toBeLessThanOrEqual(theirs);
    expect(s.inserted + s.suppressed).toBe(big.length);
  });
});
