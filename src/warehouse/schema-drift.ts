import { sql } from 'kysely';
import { type DriftNote, type DriftSource, driftKey } from '../common/schema-drift.ts';
import { storedKey } from '../common/stored-key.ts';
import type { LoaderClient } from './ledger.ts';
import type { Executor } from './types.ts';

/**
 * `schema_drift` and its counts (migration 2026-11-25T05-00-00): what the parsers noticed
 * differs from the contract, written with the data it was noticed in. People read it through the
 * read model (read/schema-drift.ts: `crs-sync schema changes`, status, the dashboard, the alerts).
 *
 * A drift's count is Σ over scope of (max over load key of Σ over partition): see the migration.
 * Paths and scopes are keys of both tables: written as `storedKey` bounds them (the parsers note
 * paths bounded already; this keeps any caller's within a btree row).
 */

/** Drift noticed in a batch or a page, counted per scope. */
export interface DriftCount {
  note: DriftNote;
  /** An export line's UTC day ('' when unknown); a thread-API entity's id. */
  scope: string;
  day: string | null;
  count: number;
}

const UPSERT_DRIFT_SQL = `
  insert into schema_drift (source, path, kind, expected_type, actual_type, example, first_day)
  select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::date[])
  on conflict (source, path, kind) do update set last_seen_at = now(),
    first_day = least(schema_drift.first_day, excluded.first_day)`;

const ADD_COUNTS_SQL = `
  insert into schema_drift_counts (source, path, kind, scope, load_key, part, day, count)
  select c.source, c.path, c.kind, c.scope, $1, $2, c.day, c.n
  from unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::date[], $8::bigint[])
    as c(source, path, kind, scope, day, n)
  on conflict (source, path, kind, scope, load_key, part)
    do update set count = schema_drift_counts.count + excluded.count`;

/** One row per drift (the earliest day's example), in key order: partitions lock them alike. */
function driftRows(counts: readonly DriftCount[]): unknown[][] {
  const byKey = new Map<string, DriftCount>();
  for (const c of counts) {
    const k = driftKey({ ...c.note, path: storedKey(c.note.path) });
    const had = byKey.get(k);
    if (!had || (c.day !== null && (had.day === null || c.day < had.day))) byKey.set(k, c);
  }
  const rows = [...byKey.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map((e) => e[1]);
  return [
    rows.map((r) => r.note.source),
    rows.map((r) => storedKey(r.note.path)),
    rows.map((r) => r.note.kind),
    rows.map((r) => r.note.expected),
    rows.map((r) => r.note.actual),
    rows.map((r) => r.note.example),
    rows.map((r) => r.day),
  ];
}

/**
 * A loader batch's drift, on the batch's own client inside its transaction (the checkpoint's):
 * added to this load key's counts, so a batch rolled back and merged again counts once.
 */
export async function addBatchDrift(
  client: LoaderClient,
  loadKey: string,
  part: number,
  counts: readonly DriftCount[],
): Promise<void> {
  if (counts.length === 0) return;
  await client.query({ name: 'crs_drift_upsert', text: UPSERT_DRIFT_SQL, values: driftRows(counts) });
  await client.query({
    name: 'crs_drift_counts',
    text: ADD_COUNTS_SQL,
    values: [
      loadKey,
      part,
      counts.map((c) => c.note.source),
      counts.map((c) => storedKey(c.note.path)),
      counts.map((c) => c.note.kind),
      counts.map((c) => storedKey(c.scope)),
      counts.map((c) => c.day),
      counts.map((c) => c.count),
    ],
  });
}

/**
 * Drift of thread-API responses, one count per entity (`scope`): an entity read again (a retried
 * page, a re-read history) is not counted again.
 */
export async function recordEntityDrift(db: Executor, counts: readonly DriftCount[]): Promise<void> {
  if (counts.length === 0) return;
  const [s, p, k, e, a, x, d] = driftRows(counts);
  await sql`
    insert into schema_drift (source, path, kind, expected_type, actual_type, example, first_day)
    select * from unnest(${s}::text[], ${p}::text[], ${k}::text[], ${e}::text[], ${a}::text[], ${x}::text[], ${d}::date[])
    on conflict (source, path, kind) do update set last_seen_at = now(),
      first_day = least(schema_drift.first_day, excluded.first_day)`.execute(db);
  // One row per entity and drift, whatever the number of its notes.
  const unique = new Map<string, DriftCount>();
  for (const c of counts)
    unique.set(`${driftKey({ ...c.note, path: storedKey(c.note.path) })}\u0000${storedKey(c.scope)}`, c);
  const rows = [...unique.values()];
  await sql`
    insert into schema_drift_counts (source, path, kind, scope, load_key, part, day, count)
    select c.source, c.path, c.kind, c.scope, '', 0, c.day, 1
    from unnest(${rows.map((c) => c.note.source)}::text[], ${rows.map((c) => storedKey(c.note.path))}::text[],
      ${rows.map((c) => c.note.kind)}::text[], ${rows.map((c) => storedKey(c.scope))}::text[], ${rows.map((c) => c.day)}::date[])
      as c(source, path, kind, scope, day)
    on conflict do nothing`.execute(db);
}

/**
 * Paths of a source whose drift an operator accepted: the contract a parser is built from. As
 * stored (`storedKey`), also a long one accepted before paths were bounded: the parsers look a
 * key up in that form.
 */
export async function acceptedDriftPaths(db: Executor, source: DriftSource): Promise<string[]> {
  const rows = await db
    .selectFrom('schema_drift')
    .select('path')
    .distinct()
    .where('source', '=', source)
    .where('accepted_at', 'is not', null)
    .execute();
  return rows.map((r) => storedKey(r.path));
}

/**
 * Widens the contract by a field: every open drift of `source` at `path` is accepted (a new field
 * becomes known with any type, a type change or absence stops counting as drift). `path` as
 * `schema changes` shows it, or a long one in full: it is looked up as stored too (`storedKey`).
 * Returns how many drift rows it accepted.
 */
export async function acceptSchemaDrift(db: Executor, source: DriftSource, path: string): Promise<number> {
  const r = await db
    .updateTable('schema_drift')
    .set({ accepted_at: new Date() })
    .where('source', '=', source)
    .where('path', 'in', [...new Set([path, storedKey(path)])])
    .where('accepted_at', 'is', null)
    .executeTakeFirst();
  return Number(r.numUpdatedRows);
}
