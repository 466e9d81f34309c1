import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/simulator/prng.ts';
import { testSeed } from '../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * `sync_health`'s thread figures by the status index (migration 2026-11-27T15-00-00) against the
 * one pass over every thread they replace: the pending and failed counts, and the oldest pending
 * wait, where a pending thread never requested counts from its load time. Seeded sets of threads
 * (SYNC_HEALTH_SEED=… replays one); both read in one transaction, so `now()` is the same.
 */
const SEED = testSeed(20261128, 'SYNC_HEALTH_SEED');
const rand = new Rng(SEED);
let tw: TestWarehouse;

const ONE_PASS = `
  select count(*) filter (where enrich_status = 'pending') as threads_pending,
         count(*) filter (where enrich_status = 'failed') as threads_failed,
         coalesce((select extract(epoch from now() - min(coalesce(t.enrich_requested_at, t._loaded_at)))::bigint
                   from threads t where t.enrich_status = 'pending'), 0) as enrichment_age_seconds
  from threads`;

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'health_threads' });
  console.info(`sync-health-threads test: seed ${SEED} (SYNC_HEALTH_SEED=${SEED} replays it)`);
});

afterAll(async () => {
  await tw?.dispose();
});

describe('sync_health thread figures by the status index (seeded)', () => {
  it('when threads of every status, requested or never, come and go, then the view gives what one pass over every thread gives', async () => {
    for (let round = 0; round < 12; round++) {
      const n = rand.int(40);
      for (let k = 0; k < n; k++) {
        const requested = rand.chance(0.3) ? null : `${1 + rand.int(5000)} minutes`;
        await tw.w.pool.query(
          `insert into threads (thread_id, enrich_status, enrich_requested_at, _loaded_at)
           values (gen_random_uuid(), $1, now() - $2::interval, now() - $3::interval)`,
          [
            rand.pick(['pending', 'pending', 'done', 'failed', 'forbidden', 'deleted']),
            requested,
            `${1 + rand.int(5000)} minutes`,
          ],
        );
      }
      if (rand.chance(0.3))
        await tw.w.pool.query(`update threads set enrich_status = 'done' where enrich_status = 'pending'`);
      const c = await tw.w.pool.connect();
      try {
        await c.query('begin');
        const view = await c.query(
          'select threads_pending, threads_failed, enrichment_age_seconds from sync_health',
        );
        const pass = await c.query(ONE_PASS);
        await c.query('commit');
        expect(view.rows[0], `round ${round} (seed ${SEED})`).toEqual(pass.rows[0]);
      } finally {
        c.release();
      }
    }
  });
});
