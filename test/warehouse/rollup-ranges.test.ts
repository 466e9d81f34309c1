import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { Rng } from '../../src/simulator/prng.ts';
import {
  citationTypeTotals,
  threadBreakdown,
  topThreads,
  topUsers,
  usageTotals,
} from '../../src/warehouse/read/index.ts';
import { rebuildRollups } from '../../src/warehouse/rollups/rebuild.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import { type FakeRecord, uuidFrom } from '../helpers/export-lines.ts';
import { testSeed } from '../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The per-day rows with their previous active day (src/warehouse/rollups/days.ts) give, for every
 * range of days, the same distinct users and threads, the same threads by status and depth, and
 * the same top users and threads (src/warehouse/read/users.ts, read/threads.ts) as the raw tables, after loads that
 * add a user's or a thread's days in the middle of its others, give a thread a second user,
 * withdraw days again, and after status changes written straight into `threads`; and what the
 * loads kept incrementally equals a rebuild. Records are drawn from a seeded generator (the seed
 * is printed; RANGES_SEED=… replays it).
 */

const SEED = testSeed(20261128, 'RANGES_SEED');
const log = createLogger({ level: 'silent', pretty: false });
const DAYS = Array.from({ length: 10 }, (_, i) => `2026-11-${String(i + 1).padStart(2, '0')}`);
const RANGE = { from: DAYS[0] ?? '', to: DAYS[DAYS.length - 1] ?? '' };
const config = parseConfig({
  CRS_BATCH_SIZE: '20',
  CRS_LOAD_PARTITIONS: '2',
  CRS_DELETE_GUARD: '100',
  CRS_DELETE_GUARD_LOAD: '100',
});
const dir = mkdtempSync(path.join(tmpdir(), 'crs-ranges-'));

// The simulator's seeded generator (mulberry32): the same sequence on every machine.
const rand = new Rng(SEED);
const pick = (n: number) => rand.int(n);

let tw: TestWarehouse;
let files = 0;
let records: FakeRecord[] = [];

function record(i: number, day: string, thread: number, threadId?: string): FakeRecord {
  return {
    Input: `question ${i}`,
    Response: `answer ${i} `.repeat(1 + (i % 4)),
    'Message ID': uuidFrom(`ranges:m:${i}`),
    'Message Time': `${day}T${String(i % 24).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}:00Z`,
    'Thread ID': threadId ?? uuidFrom(`ranges:t:${thread}`),
    // A thread belongs to one user; users share out 14 threads, so both recur across days.
    'User ID': uuidFrom(`ranges:u:${thread % 5}`),
  };
}

async function load(): Promise<void> {
  const file = path.join(dir, `f${files++}.jsonl`);
  writeFileSync(file, `${records.map((r) => JSON.stringify(r)).join('\n')}\n`);
  await importFile(tw.w, config, log, { file, wholeDays: RANGE });
}

/** Every range of the ten days, from the rollups and from the raw tables. */
async function expectEveryRange(stage: string): Promise<void> {
  for (let a = 0; a < DAYS.length; a++) {
    for (let b = a; b < DAYS.length; b++) {
      const r = { from: DAYS[a] ?? '', to: DAYS[b] ?? '' };
      const at = `${stage}, ${r.from}..${r.to} (seed ${SEED})`;
      expect(await usageTotals(tw.w.pool, r, 'rollup'), at).toEqual(await usageTotals(tw.w.pool, r, 'raw'));
      expect(await threadBreakdown(tw.w.pool, r, 'rollup'), at).toEqual(
        await threadBreakdown(tw.w.pool, r, 'raw'),
      );
      // Top lists, at a small limit (many ties, broken by id) and at the dashboard's.
      for (const limit of [2, 25]) {
        const users = await topUsers(tw.w.pool, r, 'raw', limit);
        expect(await topUsers(tw.w.pool, r, 'rollup', limit), `${at}, top ${limit} users`).toEqual(users);
        const threads = await topThreads(tw.w.pool, r, 'raw', limit);
        expect(await topThreads(tw.w.pool, r, 'rollup', limit), `${at}, top ${limit} threads`).toEqual(
          threads,
        );
      }
    }
  }
  const tables = async () => {
    const out: string[][] = [];
    for (const t of ['rollup_user_daily', 'rollup_thread_daily', 'rollup_thread_firsts']) {
      const q = await tw.w.pool.query<{ r: string }>(`select x::text as r from ${t} x order by 1`);
      out.push(q.rows.map((row) => row.r));
    }
    return out;
  };
  const incremental = await tables();
  expect(incremental[0]?.length, `${stage}: rollup_user_daily has rows`).toBeGreaterThan(0);
  await rebuildRollups(tw.w.pool, null);
  expect(await tables(), `${stage}: incremental = rebuild (seed ${SEED})`).toEqual(incremental);
}

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'ranges' });
  console.info(`rollup-ranges test: seed ${SEED} (RANGES_SEED=${SEED} replays it)`);
});
afterAll(async () => {
  await tw?.dispose();
});

describe('range rollups', () => {
  it('when records are loaded over ten days, then every range counts its distinct users and threads as the raw tables do', async () => {
    // Days 4 and 7 are left empty for now: later loads fill them between a user's other days.
    const open = DAYS.filter((_, i) => i !== 4 && i !== 7);
    records = Array.from({ length: 120 }, (_, i) => record(i, open[pick(open.length)] ?? '', pick(14)));
    await load();
    await expectEveryRange('first load');
  });

  it('when a later load adds days between a user’s other days, then the next day’s previous day moves', async () => {
    const added = Array.from({ length: 25 }, (_, i) =>
      record(1000 + i, DAYS[i % 2 === 0 ? 4 : 7] ?? '', pick(14)),
    );
    records = [...records, ...added];
    await load();
    await expectEveryRange('days filled in the middle');
  });

  it('when a thread has a second user (the export does not promise one user a thread), then it still counts once in every range', async () => {
    // Records written into existing threads by another user: on a day the thread already has,
    // and on a day it did not have.
    const threads = [...new Set(records.map((r) => r['Thread ID']))];
    const guests = Array.from({ length: 12 }, (_, i) => {
      const base = records[pick(records.length)];
      const day = i % 2 === 0 ? (base?.['Message Time'].slice(0, 10) ?? '') : (DAYS[pick(DAYS.length)] ?? '');
      return {
        ...record(2000 + i, day, 0, threads[pick(threads.length)]),
        'User ID': uuidFrom(`ranges:guest:${i % 3}`),
      };
    });
    records = [...records, ...guests];
    await load();
    const shared = await tw.w.pool.query<{ n: number }>(
      `select count(*)::int as n from (select thread_id, message_date from rollup_thread_daily
        group by 1, 2 having count(*) > 1) x`,
    );
    expect(shared.rows[0]?.n, 'a thread-day with two users').toBeGreaterThan(0);
    await expectEveryRange('second users');
  });

  it('when a load withdraws a whole day and one user’s records of another, then the counts follow (soft deletes)', async () => {
    const gone = DAYS[pick(DAYS.length)];
    const user = records[pick(records.length)]?.['User ID'];
    const other = DAYS[pick(DAYS.length)];
    records = records.filter(
      (r) =>
        !r['Message Time'].startsWith(gone ?? '') &&
        !(r['User ID'] === user && r['Message Time'].startsWith(other ?? '')),
    );
    await load();
    const deleted = await tw.w.pool.query<{ n: number }>(
      'select count(*)::int as n from analytics_messages where _deleted_at is not null',
    );
    expect(deleted.rows[0]?.n).toBeGreaterThan(0);
    await expectEveryRange('withdrawn');
  });

  it('when statuses change or a thread row goes away, written straight into threads, then the breakdown follows after a refresh', async () => {
    const ids = (
      await tw.w.pool.query<{ id: string }>('select thread_id::text as id from threads order by 1')
    ).rows;
    expect(ids.length).toBeGreaterThan(3);
    await tw.w.pool.query(`update threads set enrich_status = 'failed' where thread_id = $1`, [ids[0]?.id]);
    await tw.w.pool.query(`update threads set enrich_status = 'done' where thread_id = $1`, [ids[1]?.id]);
    await tw.w.pool.query('delete from threads where thread_id = $1', [ids[2]?.id]);
    // An update that leaves the status as it was marks nothing.
    await tw.w.pool.query('update threads set message_count = message_count where thread_id = $1', [
      ids[3]?.id,
    ]);
    const marked = await tw.w.pool.query<{ id: string }>(
      'select thread_id::text as id from rollup_dirty_threads',
    );
    expect(new Set(marked.rows.map((r) => r.id))).toEqual(new Set([ids[0]?.id, ids[1]?.id, ids[2]?.id]));
    await refreshRollups(tw.w.pool);
    await expectEveryRange('statuses changed');
    const failed = await threadBreakdown(tw.w.pool, RANGE, 'rollup');
    expect(failed.statuses.find((s) => s.status === 'failed')?.threads).toBe(1);
    expect(failed.statuses.find((s) => s.status === '(not queued)')?.threads).toBe(1);
  });

  it('when a citation has no day, then the citation totals of every day leave it out, as the raw tables do', async () => {
    const [thread] = (
      await tw.w.pool.query<{ id: string }>(
        'select thread_id::text as id from rollup_threads where messages > 0 limit 1',
      )
    ).rows;
    const cite = (owner: string, threadId: string, name: string) =>
      tw.w.pool.query(
        `insert into citations (owner_kind, owner_id, ordinal, thread_id, citation_type, name)
         values ('artifact', $1, 0, $2, 'web', $3)`,
        [owner, threadId, name],
      );
    // Dated: its thread has live export rows (its first day is the citation's day).
    await cite('a-dated', thread?.id ?? '', 'dated.example');
    await refreshRollups(tw.w.pool);
    for (const r of [RANGE, { from: DAYS[3] ?? '', to: DAYS[6] ?? '' }]) {
      expect(await citationTypeTotals(tw.w.pool, r, 'rollup')).toEqual(
        await citationTypeTotals(tw.w.pool, r, 'raw'),
      );
    }
    expect(await citationTypeTotals(tw.w.pool, RANGE, 'rollup')).toEqual([
      { citationType: 'web', citations: 1, sources: 1 },
    ]);
    // Dayless: a thread with no export rows and no history.
    await cite('a-dayless', uuidFrom('ranges:no-such-thread'), 'dayless.example');
    await refreshRollups(tw.w.pool);
    expect(await citationTypeTotals(tw.w.pool, RANGE, 'rollup')).toEqual(
      await citationTypeTotals(tw.w.pool, RANGE, 'raw'),
    );
    expect(await citationTypeTotals(tw.w.pool, RANGE, 'rollup')).toEqual([
      { citationType: 'web', citations: 1, sources: 1 },
    ]);
  });

  it('when threads tie on the range’s count, then the top list breaks the tie by id as the raw tables do', async () => {
    // Its own warehouse, with keys chosen by their first hex digit: a thread ('f…') with 9
    // messages, 5 of them on the last day, two threads of 7 messages none of them on the last
    // day, and ten threads of exactly 5, all on the last day, with smaller keys. Over the last day
    // the 'f…' thread ties with the ten and loses by id (over the last two days it leads): the top
    // two are the two smallest keys of the ten.
    const keyed = (prefix: string, n: number) => {
      const out: string[] = [];
      for (let k = 0; out.length < n; k++) {
        const id = uuidFrom(`ranges:tie:${prefix}:${k}`);
        if (prefix.includes(id[0] ?? '')) out.push(id);
      }
      return out;
    };
    const [leader] = keyed('f', 1);
    const others = keyed('89ab', 2);
    const tied = keyed('01234567', 10);
    const [last, before] = [DAYS[9] ?? '', DAYS[8] ?? ''];
    let i = 5000;
    const crafted: FakeRecord[] = [];
    for (let m = 0; m < 9; m++) crafted.push(record(i++, m < 5 ? last : before, 0, leader));
    for (const t of others) for (let m = 0; m < 7; m++) crafted.push(record(i++, before, 0, t));
    for (const t of tied) for (let m = 0; m < 5; m++) crafted.push(record(i++, last, 0, t));
    // One more thread on the first day, so that the last two days are not every day (that case
    // reads the all-time rollups instead).
    crafted.push(record(i++, DAYS[0] ?? '', 1));
    const own = await createTestWarehouse({ prefix: 'ranges_tie' });
    try {
      const file = path.join(dir, 'tied.jsonl');
      writeFileSync(file, `${crafted.map((c) => JSON.stringify(c)).join('\n')}\n`);
      await importFile(own.w, config, log, { file, wholeDays: RANGE });
      const r = { from: last, to: last };
      const top = await topThreads(own.w.pool, r, 'rollup', 2);
      expect(top).toEqual(await topThreads(own.w.pool, r, 'raw', 2));
      expect(top.map((t) => t.threadId)).toEqual([...tied].sort().slice(0, 2));
      const two = { from: before, to: last };
      const both = await topThreads(own.w.pool, two, 'rollup', 2);
      expect(both).toEqual(await topThreads(own.w.pool, two, 'raw', 2));
      expect(both.map((t) => [t.threadId, t.messages])).toEqual([
        [leader, 9],
        [[...others].sort()[0], 7],
      ]);
    } finally {
      await own.dispose();
    }
  });
});
