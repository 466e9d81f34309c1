import { describe, expect, it } from 'vitest';
import { testSeed } from '../helpers/seed.ts';

describe('seeds of seeded tests (test/helpers/seed.ts)', () => {
  it('when nothing is set, then the seed is the fixed one, every time', () => {
    expect([testSeed(7, 'X_SEED', {}), testSeed(7, 'X_SEED', {})]).toEqual([7, 7]);
    expect(testSeed(7, 'X_SEED', { TEST_RANDOM_SEEDS: '0' })).toBe(7);
  });

  it("when TEST_SEED or the test's own variable is given, then it is replayed, the test's own first", () => {
    expect(testSeed(7, 'X_SEED', { TEST_SEED: '42' })).toBe(42);
    expect(testSeed(7, 'X_SEED', { TEST_SEED: '42', X_SEED: '9' })).toBe(9);
    expect(testSeed(7, 'X_SEED', { TEST_SEED: '42', TEST_RANDOM_SEEDS: '1' })).toBe(42);
    expect(() => testSeed(7, 'X_SEED', { TEST_SEED: 'abc' })).toThrow(/"abc" is not a whole number/);
  });

  it('when TEST_RANDOM_SEEDS=1, then each seed is drawn (so different draws appear)', () => {
    const drawn = new Set(
      Array.from({ length: 20 }, () => testSeed(7, undefined, { TEST_RANDOM_SEEDS: '1' })),
    );
    expect(drawn.size).toBeGreaterThan(1);
    for (const s of drawn) expect(Number.isSafeInteger(s) && s >= 0).toBe(true);
  });
});
