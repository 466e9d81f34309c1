import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log.ts';
import { testSeed } from '../../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../../helpers/warehouse.ts';
import { suppressionRounds } from './suppression-load.ts';

/**
 * The loader with every fast path against the loader with none while users and threads are
 * erased between its loads (suppression-load.ts): equal rows, rejects, counts (suppressed
 * included), ledger and rollups after every load, and no erased id left in any table.
 * Seeded: SUPPRESSION_SEED=… replays a run.
 */
const SEED = testSeed(20261129, 'SUPPRESSION_SEED');

describe('fast paths against the slow path with a suppression list (Postgres)', () => {
  let fast: TestWarehouse;
  let slow: TestWarehouse;
  beforeAll(async () => {
    [fast, slow] = await Promise.all([
      createTestWarehouse({ prefix: 'supp_fast' }),
      createTestWarehouse({ prefix: 'supp_slow' }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([fast?.dispose(), slow?.dispose()]);
  });

  it(`when seeded loads of a day read records of users and threads erased between them (seed ${SEED}), then both warehouses are equal and hold no erased id`, async () => {
    console.log(`suppression (loads): seed ${SEED} (SUPPRESSION_SEED=${SEED} replays it)`);
    const r = await suppressionRounds(fast, slow, {
      seed: SEED,
      rounds: 14,
      day: '2026-11-10',
      log: createLogger({ level: 'silent', pretty: false }),
    });
    expect(r.differences).toEqual([]);
    expect(r.loads).toBe(14);
    // The draw erased someone, and the loads met their lines.
    expect(r.erasures.users + r.erasures.threads).toBeGreaterThan(0);
    expect(r.suppressed).toBeGreaterThan(0);
  });
});
