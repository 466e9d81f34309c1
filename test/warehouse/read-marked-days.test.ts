import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MIXED_DASHBOARD_QUERIES,
  RAW_DASHBOARD_QUERIES,
  readSource,
  usageDaily,
  usageTotals,
} from '../../src/warehouse/read/index.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * While a load's batches are committed and its refresh has not run, its days are marked. Readers
 * then read the rollups for the other days and the raw rows of the marked days only: the same
 * answer as the raw tables, at a cost that follows the marked days. Users and threads here span
 * several days, so that a distinct count over a range must merge rollup days with raw days.
 */
let tw: TestWarehouse;
const DAYS = ['2026-11-01', '2026-11-02', '2026-11-03', '2026-11-04', '2026-11-05'];
const MARKED = '2026-11-03';
const RANGES = [
  { from: '2026-11-01', to: '2026-11-05' },
  { from: '2026-11-02', to: '2026-11-04' },
  { from: '2026-11-03', to: '2026-11-03' },
  { from: '2026-11-03', to: '2026-11-05' },
  { from: '2026-11-04', to: '2026-11-05' },
  { from: '2026-11-01', to: '2026-11-02' },
];

/** Export rows: [user, thread, day, response chars] each; ids from names, so days share users and threads. */
async function insertRows(rows: Array<[string, string, string, number]>): Promise<void> {
  for (const [i, [user, thread, day, chars]] of rows.entries()) {
    await tw.w.pool.query(
      `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input, response,
                                       extra, record_hash, _source_line, _load_id, response_chars)
       values (gen_random_uuid(), md5($2)::uuid, md5($1)::uuid, $3::date + interval '2 hours', $3::date,
               'q', repeat('a', $4), '{}', md5(random()::text), $5, 'seed', $4)`,
      [user, thread, day, chars, i],
    );
  }
}

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'read_marked' });
  const rows: Array<[string, string, string, number]> = [];
  DAYS.forEach((day, d) => {
    for (let u = 0; u < 4; u++) {
      if ((u + d) % 3 === 0) continue; // each user skips some days
      rows.push([`u${u}`, `t${u}-${Math.floor(d / 2)}`, day, 10 + u + d]);
      rows.push([`u${u}`, `t${(u + 1) % 4}-${Math.floor(d / 2)}`, day, u === 2 ? 0 : 20]);
    }
  });
  await insertRows(rows);
  await refreshRollups(tw.w.pool, undefined, { rebuild: true });
  // A load's batch of the marked day, committed, its refresh not yet run: a new user, a user and a
  // thread seen on other days, a user seen only later, and a deleted row.
  await insertRows([
    ['u9', 't9-1', MARKED, 5],
    ['u0', 't0-0', MARKED, 7],
    ['u3', 't3-2', MARKED, 9],
  ]);
  await tw.w.pool.query(
    `update analytics_messages set _deleted_at = now()
      where ctid = (select ctid from analytics_messages where message_date = $1 and user_id = md5('u1')::uuid limit 1)`,
    [MARKED],
  );
});

afterAll(async () => {
  await tw?.dispose();
});

describe('readers while a day is marked (a load committed, its refresh not yet run)', () => {
  it('when one day is marked, then readSource reads the rollups and the marked day raw', async () => {
    const marked = await tw.w.pool.query<{ day: string }>(
      'select distinct day::text as day from rollup_dirty_days',
    );
    expect(marked.rows.map((r) => r.day)).toEqual([MARKED]);
    expect(await readSource(tw.w.pool)).toBe('mixed');
  });

  it("when one day is marked, then every dashboard query and daily_usage give the raw tables' answer over every range", async () => {
    expect(await readSource(tw.w.pool)).toBe('mixed');
    const view = await tw.w.pool.query('select * from daily_usage order by message_date');
    const rawView = await tw.w.pool.query('select * from rollup_raw_daily_usage() order by message_date');
    expect(view.rows).toEqual(rawView.rows);
    expect(view.rows.length).toBe(DAYS.length);
    for (const r of RANGES) {
      for (const [name, query] of Object.entries(MIXED_DASHBOARD_QUERIES)) {
        const raw = await RAW_DASHBOARD_QUERIES[name]?.(tw.w.pool, r);
        expect({ name, r, rows: await query(tw.w.pool, r) }).toEqual({ name, r, rows: raw });
      }
    }
  });

  it("when a current day's rollup row and the marked day's rollup row are both made wrong, then readers show the current day's rollup and the marked day's raw rows", async () => {
    const truth = await usageDaily(tw.w.pool, RANGES[0] as { from: string; to: string }, 'raw');
    const rawMarked = truth.find((d) => d.day === MARKED)?.messages;
    await tw.w.pool.query(`update rollup_daily set messages = 1000 where message_date = '2026-11-01'`);
    await tw.w.pool.query(`update rollup_daily set messages = 5000 where message_date = $1`, [MARKED]);
    try {
      const source = await readSource(tw.w.pool);
      const days = await usageDaily(tw.w.pool, { from: '2026-11-01', to: '2026-11-05' }, source);
      expect(days.find((d) => d.day === '2026-11-01')?.messages).toBe(1000);
      expect(days.find((d) => d.day === MARKED)?.messages).toBe(rawMarked);
      const totals = await usageTotals(tw.w.pool, { from: '2026-11-01', to: '2026-11-03' }, source);
      const rawTotals = await usageTotals(tw.w.pool, { from: '2026-11-01', to: '2026-11-03' }, 'raw');
      expect(totals.messages).toBe(rawTotals.messages - Number(truth[0]?.messages) + 1000);
      const view = await tw.w.pool.query<{ d: string; messages: number }>(
        `select message_date::text as d, messages from daily_usage where message_date in ('2026-11-01', $1) order by 1`,
        [MARKED],
      );
      expect(view.rows).toEqual([
        { d: '2026-11-01', messages: 1000 },
        { d: MARKED, messages: rawMarked },
      ]);
    } finally {
      await tw.w.pool.query(`update rollup_daily set messages = $1 where message_date = '2026-11-01'`, [
        truth[0]?.messages,
      ]);
    }
  });
});
