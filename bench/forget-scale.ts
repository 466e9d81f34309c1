/**
 * `crs-sync forget --user` of one heavy user on a bench:bi-sized warehouse, with the dashboard
 * asked all the while (docs/privacy.md):
 *
 *   node bench/forget-scale.ts [--rows N (10000000)] [--days D (365)] [--users U (20000)]
 *                              [--heavy-every K (20): user 0 owns every K-th thread, ~1/K of the rows]
 *                              [--schema S (bench_forget)] [--reuse (a kept S with its user intact)] [--keep]
 *                              [--build-only (write S and keep it, for a later --reuse on a quiet machine)]
 *                              [--template DB (erase in a fresh copy of database DB, dropped after)]
 *
 * An erasure leaves nothing of the user to erase again: a schema timed with --reuse must be built
 * again. For runs one after another, build once into a database of its own and erase in copies:
 *
 *   createdb forget_tpl
 *   BENCH_DATABASE_URL=postgres://…/forget_tpl node bench/forget-scale.ts --build-only
 *   node bench/forget-scale.ts --template forget_tpl   (as often as needed)
 *
 * `--template` makes `forget_tpl_run` by CREATE DATABASE … TEMPLATE (a file copy: ~1 min at 10M
 * rows, against 9.5 min to write them), times the erasure there as --reuse does, and drops it
 * (kept with --keep). The template must have no session open on it. `--log-ms N` (with --template)
 * logs the copy's statements of N ms or more to the server's log (log_min_duration_statement).
 *
 * 1. Writes the warehouse as bench:bi does (bench/lib/bi/generate.ts: raw tables by
 *    generate_series, rollups rebuilt), with one user owning about 1/K of the rows.
 * 2. Runs `crs-sync forget --user <that user>` as a child process, as an operator would, while a
 *    client asks each dashboard page's JSON (usage, users, threads, citations, health) in turn,
 *    one request after another, from before it starts until after it ends.
 * 3. Checks what it promises: no row of the user left in any table of either schema, and the
 *    daily_usage view (rollups) equal to the live rows counted raw.
 *
 * Prints the forget's wall time, the slowest dashboard request and any section that failed, with
 * the load average: on a shared 2-core machine, times move ±10–20 % between runs.
 */
import { execFile } from 'node:child_process';
import { loadavg } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PAGE_ORDER } from '../src/dashboard/pages/index.ts';
import { startDashboard } from '../src/dashboard/server.ts';
import { openWarehouse, type Warehouse } from '../src/warehouse/db.ts';
import { migrateToLatest } from '../src/warehouse/migrator.ts';
import { ROLLUP_TABLES, rebuildRollups } from '../src/warehouse/rollups/rebuild.ts';
import { generateWarehouse } from './lib/bi/generate.ts';
import { fmtMs, table } from './lib/bi/timing.ts';
import { timeDashboardRequest } from './lib/dashboard-request.ts';
import { describeUrl, dropSchemas, quoteIdent, withDb } from './lib/db.ts';

const { values: flags } = parseArgs({
  options: {
    rows: { type: 'string', default: '10000000' },
    days: { type: 'string', default: '365' },
    users: { type: 'string', default: '20000' },
    'heavy-every': { type: 'string', default: '20' },
    schema: { type: 'string', default: 'bench_forget' },
    reuse: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    'build-only': { type: 'boolean', default: false },
    template: { type: 'string' },
    'log-ms': { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (flags.help) {
  console.log(
    'node bench/forget-scale.ts [--rows N (10000000)] [--days D (365)] [--users U (20000)] [--heavy-every K (20)]\n' +
      '                           [--schema S (bench_forget)] [--reuse] [--keep] [--build-only (write S, keep it, stop)]\n' +
      '                           [--template DB (erase in a fresh copy of database DB)]',
  );
  process.exit(0);
}
const baseUrl =
  process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = flags.schema;
const template = flags.template;
const reuse = flags.reuse || template !== undefined;
/** The database the erasure runs in: the copy of `--template`, else the one given. */
const url = template ? withDatabase(baseUrl, `${template}_run`) : baseUrl;

function withDatabase(u: string, db: string): string {
  const x = new URL(u);
  x.pathname = `/${db}`;
  return x.toString();
}
const HEAVY = '20000000-0000-4000-8000-000000000000';
const load = () => loadavg()[0]?.toFixed(1) ?? '?';
const progress = (m: string) => process.stderr.write(`  … ${m}\n`);
const root = path.resolve(import.meta.dirname, '..');

function lastDay(): string {
  const d = new Date();
  d.setUTCDate(d.getUTCDate() - 1);
  return d.toISOString().slice(0, 10);
}

async function build(w: Warehouse): Promise<void> {
  const c = await w.pool.connect();
  const t0 = performance.now();
  try {
    await generateWarehouse(
      c,
      {
        rows: Number(flags.rows),
        days: Number(flags.days),
        users: Number(flags.users),
        lastDay: lastDay(),
        heavyEvery: Number(flags['heavy-every']),
      },
      (p) => progress(`${p} (${fmtMs(performance.now() - t0)})`),
    );
  } finally {
    c.release();
  }
  await rebuildRollups(w.pool, null, (t) => progress(`rebuild ${t}`));
  for (const t of ROLLUP_TABLES) await w.pool.query(`vacuum analyze ${t}`);
  progress(`built in ${fmtMs(performance.now() - t0)}`);
}

/** `crs-sync forget` as an operator runs it: its wall time and its output. */
function forgetCli(user: string): Promise<{ ms: number; out: string }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [path.join(root, 'src/cli/main.ts'), 'forget', '--user', user, '--reason', 'bench'],
      { env: { ...process.env, DATABASE_URL: url, CRS_SCHEMA: schema }, cwd: root },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`forget failed: ${stderr || err.message}`));
        else resolve({ ms: performance.now() - t0, out: stdout.trim() });
      },
    );
  });
}

/** Tables of either schema with a uuid or text column that holds the user's id. */
async function rowsOfUser(w: Warehouse): Promise<string[]> {
  const cols = await w.pool.query<{ s: string; t: string; c: string }>(
    `select c.table_schema as s, c.table_name as t, c.column_name as c
       from information_schema.columns c join information_schema.tables t
         on t.table_schema = c.table_schema and t.table_name = c.table_name and t.table_type = 'BASE TABLE'
      where c.table_schema in ($1::text, $1::text || '_internal') and c.data_type in ('uuid', 'text', 'jsonb')`,
    [schema],
  );
  const found: string[] = [];
  for (const { s, t, c } of cols.rows) {
    const r = await w.pool.query(`select 1 from "${s}"."${t}" where "${c}"::text like $1 limit 1`, [
      `%${HEAVY}%`,
    ]);
    if (r.rowCount) found.push(`${s}.${t}.${c}`);
  }
  return found;
}

console.log(`# forget at scale — ${new Date().toISOString()}`);
console.log(`database ${describeUrl(url)}, schema ${schema}, load average at start ${load()}`);
if (template) {
  const t0 = performance.now();
  await withDb(baseUrl, async (c) => {
    await c.query(`drop database if exists ${quoteIdent(`${template}_run`)}`);
    await c.query(
      `create database ${quoteIdent(`${template}_run`)} template ${quoteIdent(template)} strategy file_copy`,
    );
    if (flags['log-ms'])
      await c.query(
        `alter database ${quoteIdent(`${template}_run`)} set log_min_duration_statement = ${Number(flags['log-ms'])}`,
      );
  });
  console.log(`copied database ${template} in ${fmtMs(performance.now() - t0)}`);
}
if (!reuse) await dropSchemas(url, [schema, `${schema}_internal`]);
const w = openWarehouse({ url, schema, max: 4, timeouts: { statementMs: 0, lockMs: 0, idleTxMs: 0 } });
await migrateToLatest(w);
if (!reuse) await build(w);
if (flags['build-only']) {
  await w.close();
  console.log(`built ${schema}; time the erasure with --reuse`);
  process.exit(0);
}
await w.pool.query('vacuum analyze');
const share = await w.pool.query<{ n: number; total: number }>(
  `select count(*) filter (where user_id = $1)::int as n, count(*)::int as total from analytics_messages`,
  [HEAVY],
);
const { n, total } = share.rows[0] ?? { n: 0, total: 0 };
console.log(`user ${HEAVY}: ${n} of ${total} rows (${((n / total) * 100).toFixed(2)} %)\n`);

const dash = await startDashboard({ pool: w.pool, port: 0 });
let asking = true;
const asked: { page: string; ms: number; failed: number; status: number }[] = [];
const asker = (async () => {
  for (let i = 0; asking; i++) {
    const page = PAGE_ORDER[i % PAGE_ORDER.length] as string;
    const t = await timeDashboardRequest(dash.url, `/api/${page}`);
    asked.push({ page, ...t });
  }
})();
await new Promise((r) => setTimeout(r, 1000));
const before = asked.length;
const f = await forgetCli(HEAVY);
const during = asked.slice(before);
await new Promise((r) => setTimeout(r, 1000));
asking = false;
await asker;
await dash.close();
const loadAfter = load();

const slowest = [...during].sort((a, b) => b.ms - a.ms)[0];
console.log(f.out);
console.log(
  `\n${table(
    [
      'rows of the user',
      'forget (CLI, wall)',
      'dashboard requests during it',
      'slowest',
      'failed sections',
      'load',
    ],
    [
      [
        String(n),
        fmtMs(f.ms),
        String(during.length),
        slowest ? `${fmtMs(slowest.ms)} (${slowest.page})` : '-',
        String(during.reduce((a, r) => a + r.failed + (r.status === 200 ? 0 : 1), 0)),
        loadAfter,
      ],
    ],
  )}`,
);
const perPage = PAGE_ORDER.map((p) => {
  const ms = during.filter((r) => r.page === p).map((r) => r.ms);
  return [p, String(ms.length), ms.length ? fmtMs(Math.max(...ms)) : '-'];
});
console.log(`\n${table(['page', 'requests during forget', 'slowest'], perPage)}`);

const left = await rowsOfUser(w);
const usage = await w.pool.query<{ view: number; raw: number }>(
  `select (select coalesce(sum(messages), 0) from daily_usage)::int as view,
          (select count(*) from analytics_messages where _deleted_at is null)::int as raw`,
);
console.log(`\nthe user's id left in: ${left.length ? left.join(', ') : 'no table'}`);
console.log(`daily_usage ${usage.rows[0]?.view} messages, raw live rows ${usage.rows[0]?.raw}`);
const goals = [
  ['forget ≤ 60 s', f.ms <= 60_000],
  ['every dashboard request ≤ 1 s', (slowest?.ms ?? 0) <= 1000],
  ['no row of the user left', left.length === 0],
  ['daily_usage equals the raw rows', usage.rows[0]?.view === usage.rows[0]?.raw],
] as const;
for (const [g, ok] of goals) console.log(`${ok ? 'met' : 'NOT MET'}: ${g}`);
await w.close();
if (flags.keep) console.log(`kept ${template ? `database ${template}_run` : `schema ${schema}`}`);
else if (template) await withDb(baseUrl, (c) => c.query(`drop database ${quoteIdent(`${template}_run`)}`));
else await dropSchemas(url, [schema, `${schema}_internal`]);
