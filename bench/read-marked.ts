/**
 * bench:read-marked — every dashboard query and `daily_usage` over bench:bi's kept warehouse
 * while one day is marked (a load's batch committed, its refresh not yet run): before (the raw
 * tables, as readers read them while anything was marked) and after (the rollups for the current
 * days, the marked day raw: readSource's `mixed`). All in one transaction that marks the last day
 * and applies the view migration, rolled back at the end: the kept schema is left as it was.
 *
 *   node bench/read-marked.ts [--schema bench_bi] [--days 30] [--runs 3]
 *
 * Needs DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) and a schema made by
 * `npm run bench:bi -- --keep`. Not part of the tests.
 */
import { parseArgs } from 'node:util';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { up as viewsFollowMarks } from '../migrations/2026-11-25T08-00-00_daily_usage_follows_marks.ts';
import { MIXED_DASHBOARD_QUERIES, RAW_DASHBOARD_QUERIES } from '../src/warehouse/read/index.ts';
import { fmtMs, median, table, timeRuns } from './lib/bi/timing.ts';

const { values: flags } = parseArgs({
  options: {
    schema: { type: 'string', default: 'bench_bi' },
    days: { type: 'string', default: '30' },
    runs: { type: 'string', default: '3' },
    // Only these queries (comma-separated names): the raw forms of some take 30 s each here.
    only: { type: 'string' },
  },
});
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const runs = Number(flags.runs);
const span = Number(flags.days);

const client = new pg.Client({ connectionString: url, options: `-c search_path=${flags.schema}` });
await client.connect();
// One connection for kysely too, so the migration runs inside the transaction it is rolled back with.
const db = new Kysely<unknown>({
  dialect: new PostgresDialect({
    pool: { connect: async () => Object.assign(client, { release: () => {} }), end: async () => {} } as never,
  }),
});
try {
  await client.query('begin');
  // As the dashboard's snapshot (src/warehouse/read/snapshot.ts): no JIT.
  await client.query(`set local statement_timeout = '120s'; set local jit = off`);
  await viewsFollowMarks(db);
  const [last] = (await client.query<{ d: string }>('select max(message_date)::text as d from rollup_daily'))
    .rows;
  if (!last?.d)
    throw new Error(`schema ${flags.schema} has no rollup rows: run npm run bench:bi -- --keep first`);
  const range = {
    from: (await client.query<{ d: string }>(`select ($1::date - $2::int)::text as d`, [last.d, span - 1]))
      .rows[0]?.d as string,
    to: last.d,
  };
  const rows = (
    await client.query<{ n: string }>(
      'select count(*) as n from analytics_messages where message_date = $1',
      [last.d],
    )
  ).rows;
  await client.query('insert into rollup_dirty_days values ($1)', [last.d]);
  console.log(
    `## Readers with one day marked (${last.d}, ${rows[0]?.n} rows), range ${range.from} … ${range.to}\n` +
      `before: the raw tables (one run); after: rollups + the marked day raw (median of ${runs}); "same" = identical rows.\n`,
  );
  const out: string[][] = [];
  let slowest = { name: '', ms: 0 };
  const compare = async (name: string, before: () => Promise<unknown>, after: () => Promise<unknown>) => {
    const b = await timeRuns(1, before);
    const a = await timeRuns(runs, after);
    const ms = median(a.ms);
    if (ms > slowest.ms) slowest = { name, ms };
    const same = JSON.stringify(a.result) === JSON.stringify(b.result);
    out.push([name, fmtMs(b.ms[0] ?? 0), fmtMs(ms), same ? 'same' : 'DIFFERENT']);
    console.error(`${name}: ${fmtMs(b.ms[0] ?? 0)} → ${fmtMs(ms)}`);
  };
  const only = flags.only?.split(',');
  for (const [name, after] of Object.entries(MIXED_DASHBOARD_QUERIES)) {
    if (only && !only.includes(name)) continue;
    const before = RAW_DASHBOARD_QUERIES[name];
    if (before)
      await compare(
        name,
        () => before(client, range),
        () => after(client, range),
      );
  }
  const view = (text: string) => async () =>
    (
      await client.query(`${text} where message_date between $1 and $2 order by message_date`, [
        range.from,
        range.to,
      ])
    ).rows;
  await compare(
    'view daily_usage',
    view('select * from rollup_raw_daily_usage()'),
    view('select * from daily_usage'),
  );
  console.log(table(['query', 'before', 'after', 'rows'], out));
  console.log(`\nslowest after: ${slowest.name} ${fmtMs(slowest.ms)}`);
} finally {
  await client.query('rollback').catch(() => {});
  await client.end();
}
