/**
 * What a checkout's loader leaves in the warehouse, as digests: the same generated export loaded
 * by `crs-sync import` of the checkout at --root (this one by default, or a worktree of another
 * commit), in three steps that take every path of the merge (a first load; a second file with
 * changed, removed and poison lines declared complete, so rows are updated, deleted and
 * quarantined; the first file again). Prints one digest per table (the loader's, then the BI
 * rollups its finalize refreshes) and step; two checkouts whose digests agree held the same
 * contents. Times the load takes from the clock (_loaded_at, started_at, ...) are compared only
 * as set or not set.
 *
 *   node bench/held-contents.ts [--root DIR] [--lines N] [--seed S]
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { ROLLUP_TABLES } from '../src/warehouse/rollups/rebuild.ts';
import { dropSchemas, withDb } from './lib/db.ts';
import { ensureExport } from './lib/generate.ts';
import { measure } from './lib/measure.ts';

const { values } = parseArgs({
  options: {
    root: { type: 'string', default: path.resolve(import.meta.dirname, '..') },
    lines: { type: 'string', default: '20000' },
    seed: { type: 'string', default: '13' },
    url: { type: 'string', default: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test' },
  },
});
const root = path.resolve(values.root);
// Counts a later release added, 0 unless its feature is used (`crs-sync forget`): left out, so a
// checkout from before them compares. The bookkeeping (the quarantine, held deletes) is in the
// internal schema since 2026-11-28: both schemas are read.
const ADDED_COLUMNS = ['rows_suppressed'];
const lines = Number(values.lines);
const seed = Number(values.seed);
const url = values.url;
const out = path.resolve(import.meta.dirname, 'out', 'held-contents');
mkdirSync(out, { recursive: true });

const first = ensureExport(out, lines, seed);
// The second file: every 50th line changed (its response), every 97th gone, poison lines between.
const second = path.join(out, `second-s${seed}-${lines}.jsonl`);
const src = readFileSync(first.path, 'utf8').split('\n');
const kept: string[] = [];
const poison = [
  '{not json',
  '{"Message ID": "x"}',
  '\u0000',
  '{"Message ID":"00000000-0000-4000-8000-000000000001"}',
];
for (let i = 0; i < src.length; i++) {
  const l = src[i] ?? '';
  if (l === '') continue;
  if (i % 97 === 0) continue;
  kept.push(i % 50 === 0 ? l.replace('"Response":"', '"Response":"changed ') : l);
  if (i % 1000 === 7) kept.push(poison[((i / 1000) % poison.length) | 0] ?? '');
}
writeFileSync(second, `${kept.join('\n')}\n`);
const days = src
  .filter((l) => l !== '')
  .map((l) => (JSON.parse(l) as { 'Message Time': string })['Message Time'])
  .map((t) => new Date(t).toISOString().slice(0, 10))
  .sort();
// Complete days: the inner ones (the first and last may hold lines of neighbouring days' offsets).
const from = days[Math.floor(days.length * 0.1)] ?? '';
const to = days[Math.floor(days.length * 0.9)] ?? '';

const schema = `held_${createHash('sha1').update(root).digest('hex').slice(0, 8)}`;
await dropSchemas(url, [schema, `${schema}_internal`]);
const env = { ...process.env, DATABASE_URL: url, CRS_SCHEMA: schema, LOG_LEVEL: 'warn' };
const cli = path.join(root, 'bin', 'crs-sync.js');
const run = async (args: string[]) => {
  const r = await measure(process.execPath, [cli, ...args], { env, cwd: root });
  if (r.code !== 0) throw new Error(`${args.join(' ')} exited ${r.code}: ${r.stderr.slice(-800)}`);
  return r.stdout;
};

// Clock times of a load (every timestamptz but the records' own): compared as set or not; a
// quarantine row's serial id depends on which partition commits first, so it is left out;
// everything else byte for byte.
const RECORD_TIMES = new Set(['message_time', 'first_message_at', 'last_message_at']);

async function digests(step: string): Promise<void> {
  await withDb(url, async (c: pg.Client) => {
    // Both schemas, as crs-sync's own connections have them (the internal one since 2026-11-28).
    await c.query(`set search_path = "${schema}", "${schema}_internal"`);
    // The loader's tables, then the rollups its finalize refreshes (absent before their migration).
    const tables = [
      'analytics_messages',
      'sync_days',
      'rejected_records',
      'threads',
      'held_deletes',
      ...ROLLUP_TABLES,
    ];
    for (const table of tables) {
      const cols = await c.query<{ column_name: string }>(
        `select column_name from information_schema.columns
         where table_schema in ($1::text, $1::text || '_internal') and table_name = $2
           and not (table_name = 'rejected_records' and column_name = 'id')
           and column_name <> all ($3::text[])
         order by ordinal_position`,
        [schema, table, ADDED_COLUMNS],
      );
      const clock = await c.query<{ column_name: string }>(
        `select column_name from information_schema.columns
         where table_schema in ($1::text, $1::text || '_internal') and table_name = $2 and data_type like 'timestamp%'`,
        [schema, table],
      );
      const isClock = new Set(clock.rows.map((r) => r.column_name).filter((n) => !RECORD_TIMES.has(n)));
      if (cols.rows.length === 0) continue;
      const list = cols.rows
        .map((r) =>
          isClock.has(r.column_name) ? `(${r.column_name} is null) as ${r.column_name}` : r.column_name,
        )
        .join(', ');
      const order = cols.rows.some((r) => r.column_name === 'message_id')
        ? 'message_id'
        : cols.rows.some((r) => r.column_name === 'line_no')
          ? 'source_name, line_no, raw'
          : cols.rows.some((r) => r.column_name === 'day')
            ? 'day'
            : cols.rows[0]?.column_name;
      // Every column breaks ties after the table's key: rows sharing it (quarantined lines
      // without a message id) otherwise come in whatever order the scan finds them.
      const ties = cols.rows.map((_, i) => i + 1).join(', ');
      const r = await c.query({
        // Unqualified: the search_path above holds the schema and its internal one.
        text: `select ${list} from ${table} order by ${order}, ${ties}`,
        rowMode: 'array',
      });
      const h = createHash('sha256');
      for (const row of r.rows) h.update(`${JSON.stringify(row)}\n`);
      console.log(
        `${step.padEnd(8)} ${table.padEnd(20)} ${String(r.rows.length).padStart(7)} rows  ${h.digest('hex')}`,
      );
    }
  });
}

await run(['migrate']);
await run(['import', first.path, '--json', '--no-progress', '--load-id', 'held-1']);
await digests('first');
await run(['import', second, '--json', '--no-progress', '--load-id', 'held-2', '--from', from, '--to', to]);
await digests('second');
await run(['import', first.path, '--json', '--no-progress', '--load-id', 'held-3']);
await digests('again');
await dropSchemas(url, [schema, `${schema}_internal`]);
