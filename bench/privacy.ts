/**
 * Privacy benchmark (docs/privacy.md): what erasure, retention and pseudonyms cost.
 *
 *   npm run bench:privacy -- [--lines N (300000)] [--pairs P (2)] [--suppressed U (10000)] [--day-rows R (100000)]
 *
 * 1. A first load of the bench export (bench/lib/generate.ts) as users run it (`crs-sync import`,
 *    a child process), plain against CRS_USER_ID_POLICY=pseudonymize with U users on the
 *    suppression list: alternating pairs on fresh schemas, the ratio of the import's own elapsed
 *    time per pair.
 * 2. `forget` of the heaviest users together (at least 5 % of the rows) on the loaded warehouse,
 *    with the dashboard's usage page asked every 100 ms meanwhile: the erasure's time and the
 *    slowest page.
 * 3. A retention sweep of one day of R rows: its time, and whether every rollup is unchanged.
 *
 * Times move ±10–20 % between runs on a shared 2-core machine: read the ratios, and the load
 * average printed with them.
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startDashboard } from '../src/dashboard/server.ts';
import { openWarehouse, type Warehouse } from '../src/warehouse/db.ts';
import { migrateToLatest } from '../src/warehouse/migrator.ts';
import { forget } from '../src/warehouse/privacy/forget.ts';
import { applyRetention } from '../src/warehouse/privacy/retention.ts';
import { ROLLUP_TABLES } from '../src/warehouse/rollups/rebuild.ts';
import { fmtMs, table } from './lib/bi/timing.ts';
import { timeDashboardRequest } from './lib/dashboard-request.ts';
import { describeUrl, dropSchemas } from './lib/db.ts';
import { ensureExport } from './lib/generate.ts';
import { importOurs, migrateOurs, THIS_CHECKOUT } from './lib/ours.ts';
import { isOutcome } from './lib/outcome.ts';

const { values: flags } = parseArgs({
  options: {
    lines: { type: 'string', default: '300000' },
    pairs: { type: 'string', default: '2' },
    suppressed: { type: 'string', default: '10000' },
    'day-rows': { type: 'string', default: '100000' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  console.log(
    'npm run bench:privacy -- [--lines N (300000)] [--pairs P (2)] [--suppressed U (10000)] [--day-rows R (100000)]',
  );
  process.exit(0);
}
const lines = Number(flags.lines);
const pairs = Number(flags.pairs);
const suppressedUsers = Number(flags.suppressed);
const dayRows = Number(flags['day-rows']);
const url =
  process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const OUT = path.resolve(import.meta.dirname, 'out');
const KEY = 'bench-pseudonym-key-0123456789abcdef0123456789';
const load = () => loadavg()[0]!.toFixed(1);

console.log(`privacy bench: ${describeUrl(url)}, ${lines} lines, ${pairs} pair(s), load ${load()}`);
const exp = ensureExport(OUT, lines, 1);

async function fresh(schema: string): Promise<Warehouse> {
  await dropSchemas(url, [schema, `${schema}_internal`]);
  const w = openWarehouse({ url, schema, max: 6 });
  await migrateToLatest(w);
  return w;
}

/** One import of the export into a fresh schema; `private` adds the policy and the suppression list. */
async function timedLoad(schema: string, privateRun: boolean): Promise<number> {
  const w = await fresh(schema);
  if (privateRun) {
    const ids = Array.from({ length: suppressedUsers }, () => randomUUID());
    for (let i = 0; i < ids.length; i += 1000)
      await forget(w.pool, { users: ids.slice(i, i + 1000), threads: [] }, { reason: 'bench' });
  }
  await w.close();
  const before = { ...process.env };
  if (privateRun) Object.assign(process.env, { CRS_USER_ID_POLICY: 'pseudonymize', CRS_PSEUDONYM_KEY: KEY });
  try {
    const m = await migrateOurs(url, schema, THIS_CHECKOUT);
    if (m) throw new Error(m);
    const r = await importOurs(schema, exp.path, lines, url, schema, 'inserted', THIS_CHECKOUT);
    if (!isOutcome(r)) throw new Error(r.reason);
    if (r.notes.length > 0) console.log(`  ${schema}: ${r.notes.join('; ')}`);
    return r.seconds * 1000;
  } finally {
    process.env = before;
  }
}

// 1. The first load, plain against private, alternating.
const loads: string[][] = [];
const ratios: number[] = [];
for (let p = 0; p < pairs; p++) {
  const order = p % 2 === 0 ? [false, true] : [true, false];
  const ms: Record<string, number> = {};
  for (const priv of order)
    ms[priv ? 'private' : 'plain'] = await timedLoad(priv ? 'bench_priv_b' : 'bench_priv_a', priv);
  const ratio = ms.private! / ms.plain!;
  ratios.push(ratio);
  loads.push([
    String(p + 1),
    order.map((x) => (x ? 'private' : 'plain')).join(', '),
    fmtMs(ms.plain!),
    fmtMs(ms.private!),
    ratio.toFixed(3),
    load(),
  ]);
}
console.log(
  `\n1. first load of ${lines} lines: plain vs pseudonymize + ${suppressedUsers} users suppressed\n`,
);
console.log(table(['pair', 'order', 'plain', 'private', 'private / plain', 'load'], loads));
console.log(`mean ratio ${(ratios.reduce((a, b) => a + b, 0) / ratios.length).toFixed(3)} (goal ≤ 1.05)`);

// 2. forget of the heaviest users (≥ 5 % of the rows) with the dashboard asked meanwhile.
const a = openWarehouse({ url, schema: 'bench_priv_a', max: 6 });
await a.pool.query('vacuum analyze');
const heavy = await a.pool.query<{ user_id: string; n: number; total: number }>(
  `select user_id::text, count(*)::int as n, sum(count(*)) over ()::int as total
     from analytics_messages group by 1 order by 2 desc`,
);
const victims: string[] = [];
let share = 0;
for (const r of heavy.rows) {
  if (share >= 0.05) break;
  victims.push(r.user_id);
  share += r.n / r.total;
}
const dash = await startDashboard({ pool: a.pool, port: 0 });
let asking = true;
const pageMs: number[] = [];
const asker = (async () => {
  while (asking) {
    const t = await timeDashboardRequest(dash.url, '/usage');
    pageMs.push(t.ms);
    await new Promise((r) => setTimeout(r, 100));
  }
})();
await new Promise((r) => setTimeout(r, 500));
const t0 = performance.now();
const erased = await forget(a.pool, { users: victims, threads: [] }, { reason: 'bench' });
const forgetMs = performance.now() - t0;
await new Promise((r) => setTimeout(r, 300));
asking = false;
await asker;
await dash.close();
console.log(
  `\n2. forget of the ${victims.length} heaviest user(s), ${(share * 100).toFixed(1)} % of ${heavy.rows[0]?.total} rows\n`,
);
console.log(
  table(
    ['rows erased', 'forget', 'dashboard requests', 'slowest', 'load'],
    [
      [
        String(Object.values(erased.rows).reduce((x, y) => x + y, 0)),
        fmtMs(forgetMs),
        String(pageMs.length),
        fmtMs(Math.max(...pageMs)),
        load(),
      ],
    ],
  ),
);
await a.close();

// 3. A retention sweep of one day of `dayRows` rows.
const day = '2026-01-15';
const dayFile = path.join(OUT, `privacy-day-${dayRows}.jsonl`);
const words = 'the quick brown fox jumps over the lazy dog while the research assistant answers '.repeat(8);
const users = Array.from({ length: 300 }, () => randomUUID());
const threads = Array.from({ length: Math.max(100, dayRows / 30) }, (_, i) => [
  randomUUID(),
  users[i % users.length]!,
]);
const out: string[] = [];
for (let i = 0; i < dayRows; i++) {
  const [thread, user] = threads[i % threads.length]!;
  const s = String(i % 86400);
  const time = `${day}T${String(Math.floor(Number(s) / 3600)).padStart(2, '0')}:${String(Math.floor((Number(s) % 3600) / 60)).padStart(2, '0')}:${String(Number(s) % 60).padStart(2, '0')}Z`;
  out.push(
    JSON.stringify({
      'Message ID': randomUUID(),
      'Thread ID': thread,
      'User ID': user,
      'Message Time': time,
      Input: words.slice(0, 80 + (i % 200)),
      Response: words.slice(0, 300 + (i % 300)),
    }),
  );
}
writeFileSync(dayFile, `${out.join('\n')}\n`);
const c = await fresh('bench_priv_c');
await c.close();
{
  const m = await migrateOurs(url, 'bench_priv_c', THIS_CHECKOUT);
  if (m) throw new Error(m);
  const r = await importOurs('day', dayFile, dayRows, url, 'bench_priv_c', 'inserted', THIS_CHECKOUT);
  if (!isOutcome(r)) throw new Error(r.reason);
}
const cw = openWarehouse({ url, schema: 'bench_priv_c', max: 4 });
await cw.pool.query('vacuum analyze');
const digest = async () => {
  const parts: string[] = [];
  for (const t of ROLLUP_TABLES) {
    const r = await cw.pool.query<{ d: string }>(
      `select md5(coalesce(string_agg(x::text, ',' order by x::text), '')) as d from ${t} x`,
    );
    parts.push(r.rows[0]!.d);
  }
  return parts.join(':');
};
const before = await digest();
const t1 = performance.now();
const swept = await applyRetention(cw.pool, 30, { today: '2026-03-01' });
const sweepMs = performance.now() - t1;
const same = (await digest()) === before;
console.log(`\n3. retention sweep of one day of ${dayRows} rows\n`);
console.log(
  table(
    ['rows cleared', 'sweep', 'rollups unchanged', 'load'],
    [[String(swept.rows.analytics_messages), fmtMs(sweepMs), same ? 'yes' : 'NO', load()]],
  ),
);
await cw.close();
await dropSchemas(url, [
  'bench_priv_a',
  'bench_priv_a_internal',
  'bench_priv_b',
  'bench_priv_b_internal',
  'bench_priv_c',
  'bench_priv_c_internal',
]);
