import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSource } from '../../src/warehouse/read/source.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * One rule chooses between the rollups and the raw tables for every reader: the rollups while
 * they are current, the raw tables otherwise. The read model asks it in TypeScript
 * (`readSource`), the BI views in their SQL; both must choose alike. A rollup row is made to
 * disagree with the raw rows on purpose, so that which one a view read shows in its figures.
 */
let tw: TestWarehouse;
const DAY = '2026-11-20';

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'read_source' });
  await tw.w.pool.query(
    `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input, response,
                                     extra, record_hash, _source_line, _load_id, response_chars)
     select gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), $1::date + interval '1 hour', $1::date,
            'q', 'an answer', '{}', md5(i::text), i, 'seed', 9
       from generate_series(1, 3) i`,
    [DAY],
  );
  await refreshRollups(tw.w.pool, undefined, { rebuild: true });
});

afterAll(async () => {
  await tw?.dispose();
});

async function viewMessages(): Promise<number> {
  const r = await tw.w.pool.query<{ messages: number }>(
    'select messages from daily_usage where message_date = $1',
    [DAY],
  );
  return Number(r.rows[0]?.messages);
}

describe('the choice between rollups and raw tables', () => {
  it('when nothing is marked, then readSource chooses the rollups and the views read them too', async () => {
    await tw.w.pool.query('update rollup_daily set messages = 1000 where message_date = $1', [DAY]);
    expect(await readSource(tw.w.pool)).toBe('rollup');
    expect(await viewMessages()).toBe(1000);
  });

  it('when only a thread is marked, then readSource reads the marked keys raw and daily_usage keeps reading the day from the rollups', async () => {
    await tw.w.pool.query('insert into rollup_dirty_threads (thread_id) values (gen_random_uuid())');
    expect(await readSource(tw.w.pool)).toBe('mixed');
    expect(await viewMessages()).toBe(1000);
    await tw.w.pool.query('delete from rollup_dirty_threads');
  });

  it('when a day is marked for a refresh, then readSource reads the marked days raw and the views read that day raw too', async () => {
    await tw.w.pool.query('insert into rollup_dirty_days (day) values ($1)', [DAY]);
    expect(await readSource(tw.w.pool)).toBe('mixed');
    expect(await viewMessages()).toBe(3);
  });

  it('when a rebuild is pending, then both read the raw tables', async () => {
    await tw.w.pool.query('delete from rollup_dirty_days');
    await tw.w.pool.query('update rollup_state set rebuild_needed = true');
    expect(await readSource(tw.w.pool)).toBe('raw');
    expect(await viewMessages()).toBe(3);
  });
});
