/**
 * `npm run fuzz`: the loader's fuzz property (loader-fuzz-core.ts) over at least 100,000 mutated
 * lines, in a schema of its own on TEST_DATABASE_URL (default the local test database; never
 * DATABASE_URL), dropped after.
 *
 *   FUZZ_SEED=<n> FUZZ_LINES=<n> npm run fuzz
 */
import { randomBytes } from 'node:crypto';
import { parseConfig } from '../../../src/config.ts';
import { createLogger } from '../../../src/log.ts';
import { openWarehouse } from '../../../src/warehouse/db.ts';
import { dropSchema, migrateToLatest } from '../../../src/warehouse/migrator.ts';
import { testDatabaseUrl } from '../../helpers/test-database.ts';
import { newTally, runFuzz, tallyTable } from './loader-fuzz-core.ts';

const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const lines = Number(process.env.FUZZ_LINES ?? 100_000);
const url = testDatabaseUrl();

console.log(`loader fuzz: FUZZ_SEED=${seed} FUZZ_LINES=${lines}`);
const w = openWarehouse({ url, schema: `fuzz_${randomBytes(5).toString('hex')}`, max: 10 });
const tally = newTally();
const started = Date.now();
let failed = false;
try {
  await migrateToLatest(w);
  const config = parseConfig({
    CRS_BATCH_SIZE: '40',
    CRS_LOAD_PARTITIONS: '3',
    CRS_MAX_LINE_BYTES: String(256 * 1024),
  });
  await runFuzz({
    w,
    config,
    log: createLogger({ level: 'silent', pretty: false }),
    seed,
    lines,
    linesPerRun: 500,
    tally,
  });
} catch (err) {
  failed = true;
  // fast-check's report names the seed and the case (whose lines can be megabytes); what failed
  // in the case is its cause.
  const cause = (err as Error).cause;
  console.error((err as Error).message.slice(0, 4000));
  if (cause instanceof Error) console.error(`failed: ${cause.message}`);
} finally {
  await dropSchema(w).catch(() => {});
  await w.close();
}
console.log(tallyTable(tally, seed));
console.log(`${((Date.now() - started) / 1000).toFixed(0)} s`);
process.exitCode = failed ? 1 : 0;
