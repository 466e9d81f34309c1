import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log.ts';
import { testSeed } from '../../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../../helpers/warehouse.ts';
import { loadRounds } from './line-reading-load.ts';

/**
 * The loader with every fast path against the loader with none, over adversarial lines
 * (line-reading-load.ts): equal rows, rejects, counts and deletes after every pull and complete
 * load, and no row deleted that the source names. Seeded: LINE_READING_SEED=… replays a run.
 */
const SEED = testSeed(20261128, 'LINE_READING_SEED');

describe('fast paths against the slow path, adversarial lines (Postgres)', () => {
  let fast: TestWarehouse;
  let slow: TestWarehouse;
  beforeAll(async () => {
    [fast, slow] = await Promise.all([
      createTestWarehouse({ prefix: 'reading_fast' }),
      createTestWarehouse({ prefix: 'reading_slow' }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([fast?.dispose(), slow?.dispose()]);
  });

  it(`when seeded intraday pulls and complete loads read lines built to trip byte readers (seed ${SEED}), then both warehouses are equal and no row the source names is deleted`, async () => {
    console.log(`line reading (loads): seed ${SEED} (LINE_READING_SEED=${SEED} replays it)`);
    const r = await loadRounds(fast, slow, {
      seed: SEED,
      rounds: 9,
      lines: 150,
      day: '2026-11-10',
      log: createLogger({ level: 'silent', pretty: false }),
    });
    expect(r.differences).toEqual([]);
    expect(r.loads).toBe(9);
  });
});
