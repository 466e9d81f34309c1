import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/simulator/prng.ts';
import { forget } from '../../src/warehouse/privacy/forget.ts';
import { marksWaitSql } from '../../src/warehouse/rollups/mark.ts';
import { rebuildRollups } from '../../src/warehouse/rollups/rebuild.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import { rollupRows } from '../helpers/rollups.ts';
import { testSeed } from '../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * An erasure corrects the rollups for the erased threads instead of recomputing their days whole
 * (src/warehouse/privacy/forget-rollups.ts): after each `forget` of random users and threads of a
 * generated warehouse, every rollup table must equal its rebuild from the raw rows. Seeded (the
 * seed is printed; FORGET_ROLLUPS_SEED=… replays it), with the cases the arithmetic must get
 * right: users whose threads share days with others, a thread with a second user, history
 * entries, citations and artifacts on other days than the thread's rows, cancelled answers
 * (blank, and by a "User cancelled" entry, one of them in another thread than its row), soft-
 * deleted rows, a day where the erased user is the only one, and medians that move. Some rounds
 * leave writes unrefreshed before the erasure, or waiting for a pull's release: those days are
 * recomputed whole in the erasure's transaction.
 */
const SEED = testSeed(20261128, 'FORGET_ROLLUPS_SEED');
const DAYS = ['2026-10-01', '2026-10-02', '2026-10-03', '2026-10-04', '2026-10-05', '2026-10-06'];
/** Only the lonely user has rows on it: it is erased in the first round. */
const LONELY_DAY = '2026-10-07';
const LONELY = 99;
const USERS = 12;
const TYPES = ['web', 'paper', 'news'];
let tw: TestWarehouse;
let rowNo = 0;
let threadNo = 0;

type Q = (text: string, values?: unknown[]) => Promise<unknown>;
const uid = (u: number) => `md5('u' || ${u})::uuid`;

/** A thread of `user` (now and then with a second user's rows), its rows on one to three days. */
async function writeThread(q: Q, rand: Rng, user: number, days: readonly string[]): Promise<void> {
  const t = threadNo++;
  const second = rand.chance(0.15) ? (user + 1 + rand.int(USERS - 1)) % USERS : undefined;
  const first = rand.int(days.length);
  const span = days.slice(first, first + 1 + rand.int(3));
  for (let k = 1 + rand.int(6); k > 0; k--) {
    const r = rowNo++;
    const day = rand.pick(span);
    const u = second !== undefined && rand.chance(0.3) ? second : user;
    const chars = rand.chance(0.1) ? 0 : rand.pick([3, 7, 12, 12, 30, 55]) + rand.int(20);
    await q(
      `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input, response,
                                       extra, record_hash, _source_line, _load_id, response_chars, _deleted_at)
       values (md5('m' || $1)::uuid, md5('t' || $2)::uuid, ${uid(u)}, $3::date + make_interval(mins => $4), $3::date,
               'q', 'a', '{}', md5($1::text), 1, 'fuzz', $5, case when $6 then now() end)`,
      [r, t, day, rand.int(1440), chars, rand.chance(0.04)],
    );
    if (rand.chance(0.7)) {
      // Its history entry, now and then on another day, now and then "User cancelled". (Not filed
      // under another thread at random: a citation of a thread kept whose entry is erased with
      // another thread would move to its thread's first day, and no mark names that thread, in
      // the erasure as in any refresh: the marks of a history delete name the entry's thread.)
      await q(
        `insert into thread_messages (message_id, thread_id, position, created_at, is_cancelled, raw)
         values (md5('m' || $1)::uuid, md5('t' || $2)::uuid, $3, $4::date + interval '5 hours', $5, '{}')`,
        [r, t, k, rand.chance(0.2) ? rand.pick(DAYS) : day, rand.chance(0.12)],
      );
      if (rand.chance(0.6))
        await cite(q, rand, t, `'message', md5('m' || ${r})::text`, `md5('m' || ${r})::uuid`, null);
      if (rand.chance(0.15)) {
        await q(
          `insert into artifacts (artifact_id, thread_id, message_id, raw, fetched_via)
           values ('art' || $1, md5('t' || $2)::uuid, md5('m' || $1)::uuid, '{}', 'v2')`,
          [r, t],
        );
        await cite(q, rand, t, `'artifact', 'art' || ${r}`, 'null', `'art' || ${r}`);
      }
    }
  }
  // A citation whose entry is not stored: it counts on the thread's first day.
  if (rand.chance(0.3)) await cite(q, rand, t, `'message', 'unstored' || ${rowNo++}`, 'null', null);
  if (rand.chance(0.8)) {
    await q(`insert into threads (thread_id, enrich_status) values (md5('t' || $1)::uuid, $2)`, [
      t,
      rand.pick(['pending', 'done', 'failed']),
    ]);
  }
}

async function cite(q: Q, rand: Rng, t: number, owner: string, message: string, artifact: string | null) {
  await q(
    `insert into citations (owner_kind, owner_id, ordinal, message_id, artifact_id, thread_id, citation_type, name,
                            last_updated_at)
     values (${owner}, 0, ${message}, ${artifact ?? 'null'}, md5('t' || $1)::uuid, $2, $3,
             '2026-09-01'::timestamptz + make_interval(days => $4))`,
    [t, rand.pick(TYPES), `source ${rand.int(6)}`, rand.int(60)],
  );
}

/** The ids of users and threads with rows, for the draws. */
async function ids(sql: string): Promise<string[]> {
  const r = await tw.w.pool.query<{ id: string }>(sql);
  return r.rows.map((x) => x.id);
}

beforeAll(async () => {
  console.info(`forget-rollups test: seed ${SEED} (FORGET_ROLLUPS_SEED=${SEED} replays it)`);
  tw = await createTestWarehouse({ prefix: 'forget_rollups' });
});

afterAll(async () => {
  await tw?.dispose();
});

describe('the rollups an erasure corrects (seeded)', () => {
  it('when random users and threads are forgotten, then every rollup table equals its rebuild', async () => {
    const rand = new Rng(SEED);
    const q: Q = (text, values = []) => tw.w.pool.query(text, values);
    for (let t = 0; t < 70; t++) await writeThread(q, rand, t % USERS, DAYS);
    const lonelyThread = threadNo;
    await writeThread(q, rand, LONELY, [LONELY_DAY]);
    await writeThread(q, rand, LONELY, DAYS);
    // A "User cancelled" entry filed under the lonely user's thread for another user's answered
    // row of a day the lonely user has rows on: erased with that thread, the row becomes answered
    // (its day is recomputed whole, not corrected).
    const crossed = await q(
      `insert into thread_messages (message_id, thread_id, position, created_at, is_cancelled, raw)
       select a.message_id, md5('t' || $1)::uuid, 99, a.message_time, true, '{}' from analytics_messages a
       where a.user_id <> ${uid(LONELY)} and a.response_chars > 0 and a._deleted_at is null
         and not exists (select 1 from thread_messages h where h.message_id = a.message_id)
         and a.message_date in (select message_date from analytics_messages where user_id = ${uid(LONELY)})
       order by a.message_id limit 1`,
      [lonelyThread],
    );
    expect((crossed as { rowCount: number }).rowCount, 'a crossed entry').toBe(1);
    await refreshRollups(tw.w.pool, undefined, { rebuild: true });
    const lonely = await q(`select 1 from rollup_daily where message_date = $1`, [LONELY_DAY]);
    expect((lonely as { rowCount: number }).rowCount, 'the lonely day has rows').toBe(1);
    let corrected = 0;
    for (let round = 1; round <= 8; round++) {
      for (let k = rand.int(8); k > 0; k--) await writeThread(q, rand, rand.int(USERS), DAYS);
      let pending = 'none';
      if (round > 1 && rand.chance(0.3)) {
        // Writes the erasure finds unrefreshed: a marked day, and a day waiting for its release.
        await writeThread(q, rand, rand.int(USERS), DAYS);
        const c = await tw.w.pool.connect();
        try {
          await c.query('begin');
          await c.query(marksWaitSql(DAYS[2] as string));
          await writeThread((text, values = []) => c.query(text, values), rand, rand.int(USERS), [
            DAYS[2] as string,
          ]);
          await c.query('commit');
        } finally {
          c.release();
        }
        pending = 'marked and waiting';
      } else {
        await refreshRollups(tw.w.pool, undefined, { release: 'all' });
      }
      const users =
        round === 1 ? [await userId(LONELY)] : pickSome(rand, await ids(userIds), 1 + rand.int(2));
      const threads = pickSome(
        rand,
        await ids('select distinct thread_id::text as id from analytics_messages'),
        rand.int(3),
      );
      const r = await forget(tw.w.pool, { users, threads }, { reason: `round ${round}` });
      corrected += r.rollups.days;
      const left = await ids(
        `select distinct user_id::text as id from analytics_messages where user_id = any('{${users.join(',')}}'::uuid[])`,
      );
      expect(left, `round ${round}: the users are gone`).toEqual([]);
      const after = await rollupRows(tw);
      await rebuildRollups(tw.w.pool, null);
      expect(
        after,
        `round ${round} (${users.length} users, ${threads.length} threads, unrefreshed: ${pending}; seed ${SEED})`,
      ).toEqual(await rollupRows(tw));
      if (round === 1) {
        const gone = await q(`select 1 from rollup_daily where message_date = $1`, [LONELY_DAY]);
        expect((gone as { rowCount: number }).rowCount, 'the lonely day is gone').toBe(0);
      }
    }
    expect(corrected, 'days corrected').toBeGreaterThan(8);
  });
});

const userIds = 'select distinct user_id::text as id from analytics_messages order by 1';

async function userId(u: number): Promise<string> {
  const r = await tw.w.pool.query<{ id: string }>(`select ${uid(u)}::text as id`);
  return r.rows[0]!.id;
}

function pickSome(rand: Rng, all: string[], n: number): string[] {
  const out = new Set<string>();
  for (let k = 0; k < n && all.length > 0; k++) out.add(rand.pick(all));
  return [...out];
}
