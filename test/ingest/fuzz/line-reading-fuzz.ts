/**
 * `npm run fuzz:lines`: one reading of a line, at scale. First READING_LINES adversarial lines
 * (default 1,000,000) through every byte reader against JSON.parse (line-reading-core.ts), then
 * READING_LOAD_LINES more (default 1,000,000) loaded as intraday pulls and complete loads into two
 * schemas, one with every fast path and one with none, compared after each load
 * (line-reading-load.ts). Schemas on TEST_DATABASE_URL (default the local test database), dropped
 * after. Prints the seed, the lines and the time; exit 1 on any difference.
 *
 *   READING_SEED=<n> READING_LINES=<n> READING_LOAD_LINES=<n> npm run fuzz:lines
 */
import { randomBytes } from 'node:crypto';
import { createLogger } from '../../../src/log.ts';
import { Rng } from '../../../src/simulator/prng.ts';
import { openWarehouse } from '../../../src/warehouse/db.ts';
import { dropSchema, migrateToLatest } from '../../../src/warehouse/migrator.ts';
import { uuidFrom } from '../../helpers/export-lines.ts';
import type { TestWarehouse } from '../../helpers/warehouse.ts';
import { adversarialLine, disagreement, newReadingTally } from './line-reading-core.ts';
import { loadRounds } from './line-reading-load.ts';

const seed = Number(process.env.READING_SEED ?? Date.now() % 2 ** 31);
const lines = Number(process.env.READING_LINES ?? 1_000_000);
const loadLines = Number(process.env.READING_LOAD_LINES ?? 1_000_000);
const url = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const DAY = '2026-11-10';

console.log(`line reading fuzz: READING_SEED=${seed} READING_LINES=${lines} READING_LOAD_LINES=${loadLines}`);
let failed = false;

const t0 = Date.now();
const rng = new Rng(seed);
const ids = Array.from({ length: 12 }, (_, i) => uuidFrom(`reading:${seed}:${i}`));
const tally = newReadingTally();
for (let i = 0; i < lines; i++) {
  const c = adversarialLine(rng, DAY, ids);
  const d = disagreement(c, rng, tally);
  if (d !== null) {
    failed = true;
    console.error(`line ${i} (${c.note}): ${d}\n  ${c.bytes.toString('latin1').slice(0, 2000)}`);
    break;
  }
}
const readSeconds = (Date.now() - t0) / 1000;
console.log(
  `readers: ${tally.lines} lines (${tally.json} JSON, ${tally.records} records, ${tally.quickIds} quick ids, ${tally.quickUndecided} records the quick id left to the parser): ${failed ? 'DIFFERENCE' : '0 differences'} in ${readSeconds.toFixed(1)} s`,
);

function warehouse(prefix: string): TestWarehouse {
  const schema = `${prefix}_${randomBytes(5).toString('hex')}`;
  const w = openWarehouse({ url, schema, max: 10 });
  return {
    w,
    url,
    schema,
    dispose: async () => {
      await dropSchema(w).catch(() => {});
      await w.close();
    },
  };
}

if (!failed && loadLines > 0) {
  const t1 = Date.now();
  const fast = warehouse('reading_fast');
  const slow = warehouse('reading_slow');
  try {
    await Promise.all([migrateToLatest(fast.w), migrateToLatest(slow.w)]);
    const perRound = 5000;
    const r = await loadRounds(fast, slow, {
      seed,
      rounds: Math.max(1, Math.ceil(loadLines / perRound)),
      lines: perRound,
      day: DAY,
      batchSize: 200,
      log: createLogger({ level: 'silent', pretty: false }),
      onRound: (round, n) => {
        if (round % 20 === 19)
          console.log(`  loads: ${round + 1} rounds, ${n} lines, ${((Date.now() - t1) / 1000).toFixed(0)} s`);
      },
    });
    for (const d of r.differences) console.error(d);
    failed = r.differences.length > 0;
    console.log(
      `loads: ${r.loads} loads of ${r.lines} lines, each into both schemas: ${failed ? `${r.differences.length} DIFFERENCE(S)` : '0 differences'} in ${((Date.now() - t1) / 1000).toFixed(1)} s`,
    );
  } catch (err) {
    failed = true;
    console.error(`load failed: ${(err as Error).message}`);
  } finally {
    await Promise.all([fast.dispose(), slow.dispose()]);
  }
}
console.log(`seed ${seed}: ${failed ? 'FAILED' : 'passed'} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
process.exitCode = failed ? 1 : 0;
