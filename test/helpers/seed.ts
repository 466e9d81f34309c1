/**
 * The seed of a seeded fuzz, fault or property test. Fixed by default, so that CI runs the same
 * cases every time and a failure is the code's, not the draw's:
 * - `TEST_SEED=N` replays N in every seeded test (the test's own variable, e.g. `CHAOS_SEED`,
 *   replays it in that test alone and wins over TEST_SEED);
 * - `TEST_RANDOM_SEEDS=1` draws a new seed for each (to find new cases; it is printed, and
 *   `TEST_SEED` replays it);
 * - otherwise the test's fixed seed.
 * The tests print the seed they use.
 */
export function testSeed(fixed: number, own?: string, env: NodeJS.ProcessEnv = process.env): number {
  for (const given of [own ? env[own] : undefined, env.TEST_SEED]) {
    if (given === undefined || given === '') continue;
    const n = Number(given);
    if (!Number.isSafeInteger(n) || n < 0)
      throw new Error(`seed ${JSON.stringify(given)} is not a whole number`);
    return n;
  }
  if (env.TEST_RANDOM_SEEDS === '1') return Math.floor(Math.random() * 2 ** 31);
  return fixed;
}
