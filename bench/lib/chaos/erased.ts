import type pg from 'pg';
import type { AnalyticsRecord, Simulator } from '../../../src/simulator/index.ts';

/**
 * What `crs-sync forget` erased during a run, as the ground truth sees it: the users and threads
 * named, every thread of the named users (the erasure takes them whole) and every record of
 * either. The comparison expects all of it absent, and no table to name any of these ids.
 */
export interface Erased {
  /** Users named to `forget --user`, lower case. */
  users: ReadonlySet<string>;
  /** Threads named to `forget --thread`, and every thread of the erased users, lower case. */
  threads: ReadonlySet<string>;
  /** Message ids of the export records of those users and threads, lower case. */
  messages: ReadonlySet<string>;
}

export const NOTHING_ERASED: Erased = { users: new Set(), threads: new Set(), messages: new Set() };

/** Whether an export record is one the erasure took: of an erased user, or in an erased thread. */
export function isErased(erased: Erased, r: AnalyticsRecord): boolean {
  return erased.users.has(r['User ID'].toLowerCase()) || erased.threads.has(r['Thread ID'].toLowerCase());
}

/**
 * The erasure of `users` and `threads` over every day the simulator holds data for now (the
 * open day included): the users' threads and the records of both are read from the truth.
 */
export function erasedInTruth(sim: Simulator, users: Iterable<string>, threads: Iterable<string>): Erased {
  const u = new Set([...users].map((x) => x.toLowerCase()));
  const t = new Set([...threads].map((x) => x.toLowerCase()));
  const records = sim.truth.days().flatMap((d) => sim.truth.exportDay(d));
  for (const r of records) if (u.has(r['User ID'].toLowerCase())) t.add(r['Thread ID'].toLowerCase());
  const erased: Erased = { users: u, threads: t, messages: new Set() };
  const m = new Set(records.filter((r) => isErased(erased, r)).map((r) => r['Message ID'].toLowerCase()));
  return { ...erased, messages: m };
}

const UUID_RE = '[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}';

/**
 * Which tables of the data schema and its internal one (`<schema>_internal`) name one of `ids`
 * (UUIDs, any case, with or without hyphens) anywhere in a row: any column, text or JSON, bytes
 * read as text (the quarantine keeps a line's raw bytes). Returns, per id found (lower case, as
 * given), the rows naming it per table; an id no table names is left out. A JSON string that
 * spells an id with `\u` escapes is not found (a jsonb column's are, as it stores the text).
 */
export async function tablesNaming(
  pool: pg.Pool,
  schema: string,
  ids: Iterable<string>,
): Promise<Map<string, Record<string, number>>> {
  const bare = new Map([...ids].map((id) => [id.toLowerCase().replaceAll('-', ''), id.toLowerCase()]));
  const out = new Map<string, Record<string, number>>();
  if (bare.size === 0) return out;
  const cols = await pool.query<{ s: string; t: string; bytea: string[] }>(
    `select t.table_schema as s, t.table_name as t,
            coalesce(array_agg(c.column_name::text order by c.ordinal_position)
                       filter (where c.data_type = 'bytea'), '{}') as bytea
       from information_schema.tables t
       join information_schema.columns c using (table_schema, table_name)
      where t.table_schema in ($1::text, $1::text || '_internal') and t.table_type = 'BASE TABLE'
      group by 1, 2 order by 1, 2`,
    [schema],
  );
  // A schema name that matched nothing would find nothing and pass: the tables are checked.
  const names = new Set(cols.rows.map((r) => r.t));
  for (const must of ['analytics_messages', 'threads', 'rejected_records']) {
    if (!names.has(must))
      throw new Error(`tablesNaming: no table ${must} in ${schema} or ${schema}_internal`);
  }
  const quote = (s: string) => `"${s.replaceAll('"', '""')}"`;
  for (const { s, t, bytea } of cols.rows) {
    // Every id-like text of a row, once per row, hyphens dropped, against the ids sought.
    const text = ['x::text', ...bytea.map((c) => `coalesce(encode(x.${quote(c)}, 'escape'), '')`)].join(
      " || ' ' || ",
    );
    const r = await pool.query<{ id: string; n: number }>(
      `select i.id, count(*)::int as n
         from ${quote(s)}.${quote(t)} x
         cross join lateral (
           select distinct replace((regexp_matches(lower(${text}), '${UUID_RE}', 'g'))[1], '-', '') as id
         ) i
        where i.id = any($1::text[])
        group by i.id`,
      [[...bare.keys()]],
    );
    for (const { id, n } of r.rows) {
      const key = bare.get(id)!;
      const at = out.get(key) ?? {};
      at[t] = (at[t] ?? 0) + n;
      out.set(key, at);
    }
  }
  return out;
}

/** One line per erased id a table still names: the differences of the `erased` check. */
export async function erasedStillHeld(pool: pg.Pool, schema: string, erased: Erased): Promise<string[]> {
  const kinds = new Map<string, string>();
  for (const id of erased.messages) kinds.set(id, 'message');
  for (const id of erased.threads) kinds.set(id, 'thread');
  for (const id of erased.users) kinds.set(id, 'user');
  const found = await tablesNaming(pool, schema, kinds.keys());
  return [...found].map(
    ([id, tables]) =>
      `erased ${kinds.get(id)} ${id}: still in ${Object.entries(tables)
        .map(([t, n]) => `${t} (${n} row${n === 1 ? '' : 's'})`)
        .join(', ')}`,
  );
}
