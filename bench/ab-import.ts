/**
 * A/B of the first load: this checkout's `crs-sync import` against another checkout's (a git
 * worktree of an older commit), on the same generated export and database.
 *
 *   node bench/ab-import.ts --old DIR [--lines N (1000000)] [--pairs P (6)] [--seed S (1)]
 *
 * Each pair loads the file into two fresh schemas, one with each CLI, back to back; the order
 * alternates (old first in odd pairs, new first in even ones) so that neither side always runs
 * on a warmer cache. Both start after a checkpoint. Printed per pair: the import's own seconds
 * (its `elapsedMs`), its Node CPU seconds and the CPU the local PostgreSQL spent meanwhile, for
 * each side, and the ratios new/old; then the median and mean of each ratio.
 *
 * On a shared 2-core machine a single pair moves ±10–20 %: read the median of many pairs and
 * the CPU ratios (which other work on the machine moves less than wall time), with the load
 * averages printed beside them.
 */
import { loadavg } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { describeUrl, dropSchemas, withDb } from './lib/db.ts';
import { ensureExport } from './lib/generate.ts';
import { importOurs, migrateOurs, type OursTarget, THIS_CHECKOUT } from './lib/ours.ts';
import { isOutcome, type Outcome } from './lib/outcome.ts';

const { values: flags } = parseArgs({
  options: {
    old: { type: 'string' },
    lines: { type: 'string', default: '1000000' },
    pairs: { type: 'string', default: '6' },
    seed: { type: 'string', default: '1' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
const USAGE = 'node bench/ab-import.ts --old DIR [--lines N (1000000)] [--pairs P (6)] [--seed S (1)]';
if (flags.help || !flags.old) {
  console.log(USAGE);
  process.exit(flags.help ? 0 : 2);
}
const lines = Number(flags.lines);
const pairs = Number(flags.pairs);
const seed = Number(flags.seed);
if (![lines, pairs].every((n) => Number.isInteger(n) && n >= 1) || !Number.isInteger(seed)) {
  console.error(`--lines and --pairs take positive integers, --seed an integer\n${USAGE}`);
  process.exit(2);
}
const url =
  process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const OLD: OursTarget = { root: path.resolve(flags.old), nodeOptions: '' };
const NEW = THIS_CHECKOUT;
const SCHEMAS = { old: 'bench_ab_old', new: 'bench_ab_new' };
const load = () => loadavg()[0]!.toFixed(1);

async function once(side: 'old' | 'new', file: string): Promise<Outcome> {
  const schema = SCHEMAS[side];
  const target = side === 'old' ? OLD : NEW;
  await dropSchemas(url, [schema, `${schema}_internal`]);
  const m = await migrateOurs(url, schema, target);
  if (m) throw new Error(`${side}: ${m}`);
  await withDb(url, (c) => c.query('checkpoint'));
  const r = await importOurs(side, file, lines, url, schema, 'inserted', target);
  if (!isOutcome(r)) throw new Error(`${side}: ${r.reason}`);
  if (r.notes.length > 0) throw new Error(`${side}: ${r.notes.join('; ')}`);
  return r;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const f1 = (n: number | null) => (n === null ? '?' : n.toFixed(1));
const ratio = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? null : a / b);

async function main(): Promise<void> {
  const file = ensureExport(path.resolve(import.meta.dirname, 'out'), lines, seed).path;
  console.log(
    `A/B first load of ${lines.toLocaleString('en-US')} lines (${path.basename(file)}) into ${describeUrl(url)}\n` +
      `old: ${OLD.root}\nnew: ${NEW.root}\n`,
  );
  console.log(
    '| pair | order | load avg | old s (node cpu, pg cpu) | new s (node cpu, pg cpu) | new/old s | node cpu | pg cpu |',
  );
  console.log('|---:|---|---:|---|---|---:|---:|---:|');
  const rs: { s: number; cpu: number | null; pg: number | null }[] = [];
  for (let p = 1; p <= pairs; p++) {
    const order: ('old' | 'new')[] = p % 2 ? ['old', 'new'] : ['new', 'old'];
    const before = load();
    const got: Partial<Record<'old' | 'new', Outcome>> = {};
    for (const side of order) got[side] = await once(side, file);
    const o = got.old!;
    const n = got.new!;
    const r = { s: n.seconds / o.seconds, cpu: ratio(n.cpuS, o.cpuS), pg: ratio(n.pgCpuS, o.pgCpuS) };
    rs.push(r);
    console.log(
      `| ${p} | ${order.join(', ')} | ${before}–${load()} | ${f1(o.seconds)} (${f1(o.cpuS)}, ${f1(o.pgCpuS)}) | ` +
        `${f1(n.seconds)} (${f1(n.cpuS)}, ${f1(n.pgCpuS)}) | ${r.s.toFixed(3)} | ${r.cpu?.toFixed(3) ?? '?'} | ${r.pg?.toFixed(3) ?? '?'} |`,
    );
  }
  const col = (k: 's' | 'cpu' | 'pg') => rs.map((r) => r[k]).filter((x): x is number => x !== null);
  for (const [label, k] of [
    ['import seconds', 's'],
    ['Node CPU', 'cpu'],
    ['PostgreSQL CPU', 'pg'],
  ] as const) {
    const xs = col(k);
    if (xs.length > 0)
      console.log(
        `${label}, new/old: median ${median(xs).toFixed(3)}, mean ${mean(xs).toFixed(3)} (${xs.length} pairs)`,
      );
  }
  await dropSchemas(
    url,
    Object.values(SCHEMAS).flatMap((s) => [s, `${s}_internal`]),
  );
}

await main();
