import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/simulator/prng.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import type { ThreadKeys } from '../../src/warehouse/rollups/refresh-marked.ts';
import { rollupRows } from '../helpers/rollups.ts';
import { testSeed } from '../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The refresh's two forms of the touched threads (refresh-marked.ts `threadKeys`: probed by key
 * as an array, or the temporary table the planner may hash) give the same rollups. Two
 * warehouses get the same seeded writes of every kind a load and enrichment make (export rows
 * added and withdrawn, history entries with cancellations, citations of messages and artifacts,
 * statuses), one refreshed with each form, and every rollup table is compared row by row after
 * each round. The seed is printed (THREAD_KEYS_SEED=… replays it).
 */
const SEED = testSeed(20261128, 'THREAD_KEYS_SEED');
const DAYS = ['2026-11-03', '2026-11-04', '2026-11-05', '2026-11-06'];
const FORMS: ThreadKeys[] = ['probe', 'table'];
const whs: TestWarehouse[] = [];

/** One round of writes, the same in each warehouse: a generator per warehouse, same seed. */
async function writeRound(tw: TestWarehouse, rand: Rng, round: number): Promise<void> {
  const q = (text: string, values: unknown[] = []) => tw.w.pool.query(text, values);
  const rows = 10 + rand.int(25);
  for (let k = 0; k < rows; k++) {
    const thread = rand.int(40);
    const user = rand.chance(0.1) ? rand.int(9) : thread % 9;
    const day = rand.pick(DAYS);
    const id = `${round}-${k}`;
    await q(
      `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input, response,
                                       extra, record_hash, _source_line, _load_id, response_chars)
       values (md5('m' || $1)::uuid, md5('t' || $2)::uuid, md5('u' || $3)::uuid,
               $4::date + make_interval(mins => $5), $4::date, 'q', 'a', '{}', md5($1), 1, 'keys', $6)`,
      [id, thread, user, day, rand.int(1440), rand.pick([0, 7, 30])],
    );
    await q(
      `insert into threads (thread_id, enrich_status) values (md5('t' || $1)::uuid, $2)
       on conflict (thread_id) do update set enrich_status = excluded.enrich_status`,
      [thread, rand.pick(['pending', 'done', 'failed'])],
    );
    if (rand.chance(0.7)) {
      await q(
        `insert into thread_messages (message_id, thread_id, position, created_at, is_cancelled, raw)
         values (md5('m' || $1)::uuid, md5('t' || $2)::uuid, $3, $4::date + interval '1 hour', $5, '{}')`,
        [id, thread, round * 1000 + k, rand.pick([...DAYS, day]), rand.chance(0.1)],
      );
      for (let c = rand.int(3); c > 0; c--) {
        if (rand.chance(0.3)) {
          const artifact = `a-${id}-${c}`;
          await q(
            `insert into artifacts (artifact_id, thread_id, message_id, raw, fetched_via)
             values ($1, md5('t' || $2)::uuid, md5('m' || $3)::uuid, '{}', 'v2')`,
            [artifact, thread, id],
          );
          await q(
            `insert into citations (owner_kind, owner_id, ordinal, artifact_id, thread_id, citation_type, name, last_updated_at)
             values ('artifact', $1, 0, $1, md5('t' || $2)::uuid, $3, $4, $5)`,
            [
              artifact,
              thread,
              rand.pick(['web', 'doc']),
              rand.pick(['a.example', 'b.example', null]),
              `${day}T00:00:00Z`,
            ],
          );
        } else {
          await q(
            `insert into citations (owner_kind, owner_id, ordinal, message_id, thread_id, citation_type, name, last_updated_at)
             values ('message', md5('m' || $1)::text, $2, md5('m' || $1)::uuid, md5('t' || $3)::uuid, $4, $5, $6)`,
            [
              id,
              c,
              thread,
              rand.pick(['web', 'doc', null]),
              rand.pick(['a.example', 'c.example']),
              `${day}T00:00:00Z`,
            ],
          );
        }
      }
    }
  }
  // Withdrawn export rows and removed citations, chosen by the same seeded order in both.
  await q(
    `update analytics_messages set _deleted_at = now() where message_id in
       (select message_id from analytics_messages where _deleted_at is null order by md5(message_id::text || $1) limit $2)`,
    [round, 1 + rand.int(4)],
  );
  await q(
    `delete from citations where (owner_kind, owner_id, ordinal) in
       (select owner_kind, owner_id, ordinal from citations order by md5(owner_id || ordinal || $1) limit $2)`,
    [round, rand.int(3)],
  );
}

beforeAll(async () => {
  console.info(`rollup-thread-keys test: seed ${SEED} (THREAD_KEYS_SEED=${SEED} replays it)`);
  for (const _ of FORMS) whs.push(await createTestWarehouse({ prefix: 'thread_keys' }));
});

afterAll(async () => {
  for (const tw of whs) await tw.dispose();
});

describe('the refresh with the touched threads probed or hashed (seeded)', () => {
  it('when the same writes are refreshed with each form, then every rollup table holds the same rows', async () => {
    const rands = FORMS.map(() => new Rng(SEED));
    for (let round = 0; round < 5; round++) {
      for (const [i, form] of FORMS.entries()) {
        const tw = whs[i] as TestWarehouse;
        await writeRound(tw, rands[i] as Rng, round);
        const r = await refreshRollups(tw.w.pool, undefined, { rebuild: round === 0, threadKeys: form });
        if (round > 0) expect(r.threads, `round ${round}: threads refreshed (${form})`).toBeGreaterThan(0);
      }
      const [probed, hashed] = await Promise.all(whs.map(rollupRows));
      expect(probed, `round ${round} (seed ${SEED})`).toEqual(hashed);
    }
  });
});
