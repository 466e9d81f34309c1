import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { quoteIdent, withDb } from './db.ts';
import { measure } from './measure.ts';
import type { ContestResult } from './outcome.ts';

/**
 * Baseline: what a careful engineer does with psql alone. `\copy` the raw JSONL into an unlogged
 * one-column staging table, then one INSERT ... SELECT ... ON CONFLICT into a target of the same
 * shape as ours (same columns, key and secondary indexes, lz4 for the texts as in our migration
 * T04). Both steps are timed together. Our table also has `response_chars`, which our loader
 * computes itself; the baseline's has no such column, so it is spared that work.
 *
 * COPY's text format would interpret the backslashes of JSON escapes, so the file is read as CSV
 * with quote and delimiter bytes that a JSON line cannot hold raw (control characters are always
 * escaped in JSON).
 */

const PSQL = '/usr/bin/psql';

const NAMED = `array['Input','Response','Message ID','Message Time','Thread ID','User ID']`;

function setupSql(schema: string): string {
  const s = quoteIdent(schema);
  return `
    set client_min_messages = warning;
    drop schema if exists ${s} cascade;
    create schema ${s};
    create unlogged table ${s}.stage (line text not null);
    create table ${s}.analytics_messages (
      message_id uuid primary key,
      thread_id uuid not null,
      user_id uuid not null,
      message_time timestamptz not null,
      message_date date not null,
      input text compression lz4 not null,
      response text compression lz4 not null,
      extra jsonb,
      record_hash text not null,
      _load_id text not null,
      _loaded_at timestamptz not null default now(),
      _first_loaded_at timestamptz not null default now(),
      _deleted_at timestamptz
    );
    create index on ${s}.analytics_messages (message_date);
    create index on ${s}.analytics_messages (thread_id);
    create index on ${s}.analytics_messages (user_id, message_date);`;
}

function loadScript(schema: string, file: string): string {
  const s = quoteIdent(schema);
  const f = file.replaceAll("'", "''");
  // The benchmark's file repeats no message id, so no DISTINCT ON (a file that did would need
  // one: ON CONFLICT cannot touch the same key twice in one statement). Leaving it out keeps the
  // baseline at its fastest. `offset 0` keeps the planner from inlining `j` into each of its
  // uses, which would parse every line seven times.
  return `\\set ON_ERROR_STOP on
\\timing on
\\copy ${s}.stage (line) from '${f}' with (format csv, quote e'\\x01', delimiter e'\\x02')
insert into ${s}.analytics_messages as t
  (message_id, thread_id, user_id, message_time, message_date, input, response, extra, record_hash, _load_id)
select (j->>'Message ID')::uuid, (j->>'Thread ID')::uuid, (j->>'User ID')::uuid, tm,
       (tm at time zone 'UTC')::date, j->>'Input', j->>'Response',
       nullif(j - ${NAMED}, '{}'::jsonb), md5(line), 'psql-bench'
from ${s}.stage,
     lateral (select line::jsonb as j offset 0) p,
     lateral (select (j->>'Message Time')::timestamptz as tm offset 0) q
on conflict (message_id) do update set
  thread_id = excluded.thread_id, user_id = excluded.user_id, message_time = excluded.message_time,
  message_date = excluded.message_date, input = excluded.input, response = excluded.response,
  extra = excluded.extra, record_hash = excluded.record_hash, _load_id = excluded._load_id,
  _loaded_at = now(), _deleted_at = null
where t.record_hash is distinct from excluded.record_hash or t._deleted_at is not null;
`;
}

export async function runPsqlBaseline(
  file: string,
  bytes: number,
  url: string,
  schema: string,
  workDir: string,
): Promise<ContestResult> {
  const name = 'psql \\copy + INSERT ON CONFLICT';
  try {
    await withDb(url, (c) => c.query(setupSql(schema)));
  } catch (err) {
    return { name, reason: `setup failed: ${(err as Error).message}` };
  }
  const script = path.join(workDir, 'psql-baseline.sql');
  writeFileSync(script, loadScript(schema, path.resolve(file)));
  const r = await measure(PSQL, ['-X', '-d', url, '-f', script]);
  if (r.code !== 0) return { name, reason: `psql exited ${r.code}: ${r.stderr.trim().slice(-800)}` };
  // psql prints "COPY n", "Time: x ms", "INSERT 0 n", "Time: y ms".
  const times = [...r.stdout.matchAll(/^Time: ([\d.]+) ms/gm)].map((m) => Number(m[1]) / 1000);
  const copied = Number(/^COPY (\d+)/m.exec(r.stdout)?.[1] ?? Number.NaN);
  const inserted = Number(/^INSERT 0 (\d+)/m.exec(r.stdout)?.[1] ?? Number.NaN);
  const [copyS, insertS] = [times[0] ?? Number.NaN, times[1] ?? Number.NaN];
  const seconds = copyS + insertS;
  return {
    name,
    rows: copied,
    bytes,
    seconds: Number.isFinite(seconds) ? seconds : r.wallS,
    wallS: r.wallS,
    peakRssMb: r.peakRssMb,
    cpuS: r.cpuS,
    pgCpuS: r.pgCpuS,
    notes: [
      `COPY into unlogged staging ${copyS.toFixed(1)} s (${Math.round(copied / copyS).toLocaleString('en-US')} rows/s); ` +
        `INSERT ... ON CONFLICT ${insertS.toFixed(1)} s (${Math.round(inserted / insertS).toLocaleString('en-US')} rows/s), ${inserted} rows written`,
      'peak RSS is the psql client only: the work runs in the server',
    ],
  };
}
