import { afterAll, beforeAll, describe, it } from 'vitest';
import { parseConfig } from '../../../src/config.ts';
import { createLogger } from '../../../src/log.ts';
import { testSeed } from '../../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../../helpers/warehouse.ts';
import { newTally, runFuzz, tallyTable } from './loader-fuzz-core.ts';

/**
 * The short version of `npm run fuzz` (see loader-fuzz-core.ts): a few thousand mutated lines.
 * Replay a failure with FUZZ_SEED=<seed printed> (and FUZZ_LINES to change the size).
 */
const seed = testSeed(20261128, 'FUZZ_SEED');
const lines = Number(process.env.FUZZ_LINES ?? 2000);

describe('loader fuzz', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'fuzz' });
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when valid export lines are mutated every way the world mutates them, then no load fails, every line is a row, a reject or a blank line, and deletes apply never deletes a held row a later load saw', async () => {
    console.log(`loader fuzz: FUZZ_SEED=${seed} FUZZ_LINES=${lines}`);
    const tally = newTally();
    const config = parseConfig({
      CRS_BATCH_SIZE: '40',
      CRS_LOAD_PARTITIONS: '3',
      CRS_MAX_LINE_BYTES: String(256 * 1024),
    });
    try {
      await runFuzz({
        w: tw.w,
        config,
        log: createLogger({ level: 'silent', pretty: false }),
        seed,
        lines,
        linesPerRun: 500,
        tally,
      });
    } finally {
      console.log(tallyTable(tally, seed));
    }
  }, 300_000);
});
