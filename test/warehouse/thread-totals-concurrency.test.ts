import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/simulator/prng.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import { threadTotalsFromRollups } from '../../src/warehouse/rollups/status.ts';
import { drainThreadQueue, refreshQueuedThreads } from '../../src/warehouse/threads.ts';
import { testSeed } from '../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * A backfill loads several days at once under one load id, and every day's finalize updates the
 * aggregates of all the threads queued under that id: the same rows, from several connections at
 * once. Unordered, two such updates lock the rows in different orders and deadlock; Postgres
 * aborts one, and its day's whole load is retried (a second attempt in the ledger).
 */
describe('the finalize of concurrent days of one load updating the same threads', () => {
  let tw: TestWarehouse;
  const LOAD = 'load-shared-by-five-days';
  const THREADS = 3000;
  const AT_ONCE = 6;
  const ROUNDS = 5;

  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'tthr' });
    // Two messages per thread, a day apart, so every thread spans days as a backfill's do.
    await tw.w.pool.query(
      `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input,
         response, extra, record_hash, _source_line, _load_id, response_chars)
       select gen_random_uuid(), md5('th' || t)::uuid, md5('u' || (t % 50))::uuid, ts, ts::date, 'q', 'a', '{}'::jsonb,
              md5(t::text || d::text), t, $1, 1
       from generate_series(1, $2::int) t, generate_series(0, 1) d,
            lateral (select timestamptz '2026-11-20T10:00:00Z' + d * interval '1 day' + t * interval '1 second' as ts) x`,
      [LOAD, THREADS],
    );
    await tw.w.pool.query(
      `insert into threads (thread_id, user_id, enrich_status, _load_id)
       select md5('th' || t)::uuid, md5('u' || (t % 50))::uuid, 'pending', $1 from generate_series(1, $2::int) t`,
      [LOAD, THREADS],
    );
    await refreshRollups(tw.w.pool);
  });

  afterAll(async () => {
    await tw?.dispose();
  });

  // One day's finalize as the loader runs it: its batches queued threads (here a random half,
  // so the days overlap in different orders), the queue moves into `threads`, then the totals.
  const finalizeDay = async (rng: () => number) => {
    const picked = [];
    for (let t = 1; t <= THREADS; t++) if (rng() < 0.5) picked.push(t);
    await tw.w.pool.query(
      `insert into thread_queue (thread_id, user_id, load_id)
       select md5('th' || t)::uuid, md5('u' || (t % 50))::uuid, $2 from unnest($1::int[]) t`,
      [picked, LOAD],
    );
    await drainThreadQueue(tw.w.pool, LOAD);
    return (await threadTotalsFromRollups(tw.w.pool, LOAD)) ?? (await refreshQueuedThreads(tw.w.pool, LOAD));
  };

  it('when several days of one load finalize at once, then none of them deadlocks and the totals are exact', async () => {
    const seed = testSeed(2311, 'SEED');
    console.log(`thread-totals concurrency seed ${seed} (replay with SEED=${seed})`);
    const r = new Rng(seed);
    const rng = () => r.next();
    for (let round = 0; round < ROUNDS; round++) {
      const settled = await Promise.allSettled(Array.from({ length: AT_ONCE }, () => finalizeDay(rng)));
      const failed = settled.filter((s) => s.status === 'rejected').map((s) => String(s.reason));
      expect(failed, `round ${round}`).toEqual([]);
    }
    const totals = await tw.w.pool.query<{ n: number }>(
      'select count(*)::int as n from threads where message_count = 2 and first_message_at < last_message_at',
    );
    expect(totals.rows[0]?.n).toBe(THREADS);
  });
});
