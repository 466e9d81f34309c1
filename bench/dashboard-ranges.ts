/**
 * Dashboard ranges benchmark: every dashboard endpoint (the five pages and their /api/ JSON)
 * asked for ordinary and absurd ranges (the whole data, 0001-01-01 … 9999-12-31, the far future,
 * one day, the data to 9999-12-31, the default, and a malformed one) with no load running, one
 * request at a time. Prints status and time per request and the slowest. The target: every
 * request answers within 1 s whatever the range, or is refused with a 4xx; the exit status is 1
 * when one does not.
 *
 *   node bench/dashboard-ranges.ts [--rows N (200000)] [--days D (365)] [--users U (20000)]
 *                                  [--schema S (bench_dash)] [--reuse] [--keep] [--runs R (1)]
 *
 * Without --reuse it writes a warehouse of N rows as bench:bi does (bench/lib/bi/generate.ts) and
 * rebuilds its rollups; `--reuse --schema bench_bi` reads the 10M-row warehouse a
 * `npm run bench:bi -- --keep` left. Not part of the tests. Needs DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/test).
 */
import { parseArgs } from 'node:util';
import { startDashboard } from '../src/dashboard/server.ts';
import { openWarehouse, type Warehouse } from '../src/warehouse/db.ts';
import { migrateToLatest } from '../src/warehouse/migrator.ts';
import { ROLLUP_TABLES, rebuildRollups } from '../src/warehouse/rollups/rebuild.ts';
import { generateWarehouse } from './lib/bi/generate.ts';
import { fmtMs, table } from './lib/bi/timing.ts';
import { timeDashboardRequest } from './lib/dashboard-request.ts';
import { describeUrl, dropSchemas } from './lib/db.ts';

const { values: flags } = parseArgs({
  options: {
    rows: { type: 'string', default: '200000' },
    days: { type: 'string', default: '365' },
    users: { type: 'string', default: '20000' },
    schema: { type: 'string', default: 'bench_dash' },
    reuse: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    runs: { type: 'string', default: '1' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  console.log(
    'node bench/dashboard-ranges.ts [--rows N (200000)] [--days D (365)] [--users U (20000)]\n' +
      '                               [--schema S (bench_dash)] [--reuse (a kept S: no generation)] [--keep]\n' +
      '                               [--runs R (1): each request R times, the slowest shown]',
  );
  process.exit(0);
}

const TARGET_MS = 1_000;
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const progress = (s: string) => process.stderr.write(`  ${s}\n`);

/** A pool of 5, as `crs-sync dashboard` opens one (src/cli/context.ts: 1 + 4). */
function open(): Warehouse {
  return openWarehouse({ url, schema: flags.schema, max: 5 });
}

async function build(): Promise<void> {
  await dropSchemas(url, [flags.schema]);
  const w = open();
  try {
    await migrateToLatest(w);
    const c = await w.pool.connect();
    const t0 = performance.now();
    try {
      await generateWarehouse(
        c,
        {
          rows: Number(flags.rows),
          days: Number(flags.days),
          users: Number(flags.users),
          lastDay: '2026-11-22',
        },
        (p) => progress(`${p} (${fmtMs(performance.now() - t0)})`),
      );
    } finally {
      c.release();
    }
    await rebuildRollups(w.pool, null, (t) => progress(`rebuild ${t}`));
    for (const t of ROLLUP_TABLES) await w.pool.query(`vacuum analyze ${t}`);
  } finally {
    await w.close();
  }
}

interface Row {
  target: string;
  status: number;
  ms: number;
  /** Sections that answered with an error (a query stopped by the timeout among them). */
  failed: number;
}

async function main(): Promise<void> {
  console.log(`# Dashboard ranges (${describeUrl(url)}, schema ${flags.schema})\n`);
  if (!flags.reuse) await build();
  const w = open();
  const dash = await startDashboard({ pool: w.pool, port: 0 });
  const rows: Row[] = [];
  try {
    const ext = await w.pool.query<{ first: string; last: string; n: string }>(
      `select min(message_date)::text as first, max(message_date)::text as last,
              (select count(*) from analytics_messages)::text as n
         from rollup_daily where messages > 0`,
    );
    const { first, last, n } = ext.rows[0] ?? { first: null, last: null, n: '0' };
    if (!first || !last) throw new Error(`schema ${flags.schema} has no data: run without --reuse`);
    console.log(`${n} rows, ${first} … ${last}\n`);
    const ranges: [string, string][] = [
      ['whole data', `from=${first}&to=${last}`],
      ['0001-01-01 … 9999-12-31', 'from=0001-01-01&to=9999-12-31'],
      ['far future', 'from=9000-01-01&to=9999-12-31'],
      ['data … 9999-12-31', `from=${first}&to=9999-12-31`],
      ['one day', `from=${last}&to=${last}`],
      ['default (30 days)', ''],
      ['malformed (year 0000)', 'from=0000-01-01&to=9999-12-31'],
    ];
    const endpoints = ['usage', 'users', 'threads', 'citations', 'health'].flatMap((p) => [
      `/api/${p}`,
      `/${p}`,
    ]);
    for (const [, q] of ranges) {
      for (const e of endpoints) {
        const target = `${e}${q ? `?${q}` : ''}`;
        let worst: Row | undefined;
        for (let i = 0; i < Number(flags.runs); i++) {
          const { status, ms, failed } = await timeDashboardRequest(dash.url, target);
          if (!worst || ms > worst.ms) worst = { target, status, ms, failed };
        }
        if (worst) rows.push(worst);
      }
    }
  } finally {
    await dash.close();
    await w.close();
    if (!flags.keep && !flags.reuse) await dropSchemas(url, [flags.schema]);
  }
  console.log(
    table(
      ['request', 'status', 'ms', 'failed sections'],
      rows.map((r) => [r.target, String(r.status), r.ms.toFixed(0), String(r.failed)]),
    ),
  );
  const slowest = [...rows].sort((a, b) => b.ms - a.ms).slice(0, 5);
  console.log(`\nSlowest: ${slowest.map((r) => `${r.target} ${r.status} ${r.ms.toFixed(0)} ms`).join('; ')}`);
  // Met: every answer within the target and whole (no section stopped), or a 4xx refusal.
  const missed = rows.filter(
    (r) => !(r.status >= 400 && r.status < 500) && (r.ms > TARGET_MS || r.status !== 200 || r.failed > 0),
  );
  console.log(
    missed.length === 0
      ? `\nTarget met: every request answered within ${TARGET_MS} ms, or was refused with a 4xx.`
      : `\nTarget missed by ${missed.length} request(s): ${missed.map((r) => r.target).join(', ')}`,
  );
  if (missed.length > 0) process.exitCode = 1;
}

await main();
