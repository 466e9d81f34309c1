import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/simulator/prng.ts';
import { marksWaitSql } from '../../src/warehouse/rollups/mark.ts';
import { rebuildRollups } from '../../src/warehouse/rollups/rebuild.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import { rollupRows } from '../helpers/rollups.ts';
import { testSeed } from '../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * A day pull's writes, refreshed for the threads they wrote alone (migration 2026-11-27T16-00-00,
 * refresh-marked.ts `narrowedDays`), give the rollups a rebuild from the raw rows gives. Seeded
 * rounds of writes as day pulls make them (under `crs_sync.marks_wait_day`, in several
 * transactions as a pull's batches): new rows, rows changed in time, length, thread or user,
 * withdrawn and brought back, and now and then what must make the day's refresh whole (a row
 * moved to another day, a write without the setting), history entries and statuses beside them; a
 * round's refresh is sometimes skipped (a pull that died: the next one releases its marks). After
 * every refresh every rollup table must equal its rebuild. The seed is printed
 * (WAITING_THREADS_SEED=… replays it).
 */
const SEED = testSeed(20261128, 'WAITING_THREADS_SEED');
const DAYS = ['2026-11-03', '2026-11-04', '2026-11-05'];
const THREADS = 240;
const USERS = 30;
let tw: TestWarehouse;
let rowNo = 0;

type Q = (text: string, values?: unknown[]) => Promise<unknown>;

async function insertRow(q: Q, rand: Rng, day: string): Promise<void> {
  const thread = rand.int(THREADS);
  const user = rand.chance(0.1) ? rand.int(USERS) : thread % USERS;
  const id = `r${rowNo++}`;
  await q(
    `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input, response,
                                     extra, record_hash, _source_line, _load_id, response_chars)
     values (md5('m' || $1)::uuid, md5('t' || $2)::uuid, md5('u' || $3)::uuid,
             $4::date + make_interval(mins => $5), $4::date, 'q', 'a', '{}', md5($1), 1, 'waiting', $6)`,
    [id, thread, user, day, rand.int(1440), rand.pick([0, 7, 30])],
  );
}

/** A change to a few of `day`'s stored rows, chosen by the seeded order. */
async function changeRows(q: Q, rand: Rng, day: string, round: number): Promise<void> {
  const pick = `(select message_id from analytics_messages where message_date = $1
                 order by md5(message_id::text || $2) limit ${1 + rand.int(3)})`;
  const kind = rand.int(6);
  const set = [
    `message_time = $1::date + make_interval(mins => ${rand.int(1440)})`,
    `response_chars = ${rand.pick([0, 5, 40])}`,
    `thread_id = md5('t' || ${rand.int(THREADS)})::uuid`,
    `user_id = md5('u' || ${rand.int(USERS)})::uuid`,
    '_deleted_at = now()',
    '_deleted_at = null',
  ][kind];
  await q(`update analytics_messages set ${set} where message_id in ${pick}`, [day, `${round}-${kind}`]);
}

/** One day pull's writes of `day`, in 1-3 transactions (its batches), each under the setting. */
async function pullWrites(rand: Rng, day: string, round: number): Promise<void> {
  for (let b = 1 + rand.int(3); b > 0; b--) {
    const c = await tw.w.pool.connect();
    const q: Q = (text, values = []) => c.query(text, values);
    try {
      await q('begin');
      await q(marksWaitSql(day));
      for (let k = rand.int(8); k > 0; k--) await insertRow(q, rand, day);
      for (let k = rand.int(3); k > 0; k--) await changeRows(q, rand, day, round * 10 + b * 3 + k);
      await q('commit');
    } finally {
      c.release();
    }
  }
}

/** What other writers do beside the pulls, some of which must make a day's refresh whole. */
async function otherWrites(rand: Rng, day: string, round: number): Promise<string[]> {
  const q: Q = (text, values = []) => tw.w.pool.query(text, values);
  const whole: string[] = [];
  if (rand.chance(0.1)) {
    // A pull's record whose date moved: the other day is marked, under the setting too.
    const other = rand.pick(DAYS.filter((d) => d !== day));
    const c = await tw.w.pool.connect();
    try {
      await c.query('begin');
      await c.query(marksWaitSql(day));
      await c.query(
        `update analytics_messages set message_date = $2, message_time = $2::date + interval '3 hours'
         where message_id = (select message_id from analytics_messages where message_date = $1
                             order by md5(message_id::text || $3) limit 1)`,
        [day, other, round],
      );
      await c.query('commit');
    } finally {
      c.release();
    }
    whole.push('moved');
  }
  if (rand.chance(0.1)) {
    await insertRow(q, rand, day); // a file import: marks the day as it writes
    whole.push('import');
  }
  if (rand.chance(0.4)) {
    // A history entry (cancelling one of the day's messages, or not) and a status.
    await q(
      `insert into thread_messages (message_id, thread_id, position, created_at, is_cancelled, raw)
       select message_id, thread_id, $2::int, message_time, $3, '{}' from analytics_messages
       where message_date = $1 order by md5(message_id::text || $2::text) limit 1
       on conflict do nothing`,
      [day, round, rand.chance(0.5)],
    );
    await q(
      `insert into threads (thread_id, enrich_status) values (md5('t' || $1)::uuid, $2)
       on conflict (thread_id) do update set enrich_status = excluded.enrich_status`,
      [rand.int(THREADS), rand.pick(['pending', 'done', 'failed'])],
    );
  }
  return whole;
}

beforeAll(async () => {
  console.info(`rollup-waiting-threads test: seed ${SEED} (WAITING_THREADS_SEED=${SEED} replays it)`);
  tw = await createTestWarehouse({ prefix: 'waiting_threads' });
});

afterAll(async () => {
  await tw?.dispose();
});

describe("a day pull's writes refreshed for the threads they wrote (seeded)", () => {
  it('when pulls write, die and are released, then every rollup table equals its rebuild', async () => {
    const rand = new Rng(SEED);
    const q: Q = (text, values = []) => tw.w.pool.query(text, values);
    for (const day of DAYS) for (let k = 0; k < 300; k++) await insertRow(q, rand, day);
    await refreshRollups(tw.w.pool, undefined, { rebuild: true });
    let narrowed = 0;
    let whole = 0;
    let day = DAYS[1] as string;
    for (let round = 1; round <= 40; round++) {
      await pullWrites(rand, day, round);
      const others = await otherWrites(rand, day, round);
      if (rand.chance(0.2)) continue; // the pull died before its finalize: the same day's next pull releases it
      const steps: string[] = [];
      await refreshRollups(tw.w.pool, (s) => steps.push(s), { release: [day] });
      const wasNarrowed = steps.some((s) => s.includes('their written threads'));
      if (wasNarrowed) narrowed++;
      else whole++;
      if (others.length > 0)
        expect(wasNarrowed, `round ${round}: ${others.join(', ')} refresh the day whole`).toBe(false);
      const waiting = await tw.w.pool.query(
        'select 1 from rollup_waiting_days union all select 1 from rollup_waiting_threads',
      );
      expect(waiting.rowCount, `round ${round}: nothing waits`).toBe(0);
      const incremental = await rollupRows(tw);
      await rebuildRollups(tw.w.pool, null);
      expect(incremental, `round ${round}, ${wasNarrowed ? 'narrowed' : 'whole'} (seed ${SEED})`).toEqual(
        await rollupRows(tw),
      );
      if (rand.chance(0.25)) day = rand.pick(DAYS);
    }
    console.info(`rollup-waiting-threads test: ${narrowed} refreshes narrowed, ${whole} whole`);
    // 13-23 of ~30 in the runs so far; the bound only proves the narrowed form was exercised.
    expect(narrowed, 'refreshes narrowed').toBeGreaterThanOrEqual(5);
  });
});
