import { type Kysely, sql } from 'kysely';

/**
 * Schema drift: where what the service sends differs from the contract the code knows.
 *
 * - `schema_drift`: one row per source, field path and kind (new_field, missing_field,
 *   type_changed), with the first day and time it was seen, the last time, the contract's and the
 *   received type, a short redacted example, and when an operator accepted it (widening the
 *   contract: `crs-sync schema accept`).
 * - `schema_drift_counts`: the counts behind it, written with the data they count. A drift's
 *   count is the sum over `scope` of the largest count any one load key recorded for that scope
 *   (summed over its partitions): an export line's scope is its UTC day and its load key the
 *   load's, added to in the same transaction as the batch's checkpoint, so a retried batch never
 *   counts twice and a second load of the same day does not double the day; a thread-API
 *   response's scope is the entity (a thread, a history entry, an artifact) with count 1,
 *   inserted once whatever number of times it is read.
 *
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table schema_drift (
      source text not null check (source in ('export', 'thread', 'history', 'artifact')),
      path text not null,
      kind text not null check (kind in ('new_field', 'missing_field', 'type_changed')),
      expected_type text,
      actual_type text,
      example text,
      first_day date,
      first_seen_at timestamptz not null default now(),
      last_seen_at timestamptz not null default now(),
      accepted_at timestamptz,
      primary key (source, path, kind)
    )`.execute(db);
  await sql`
    create table schema_drift_counts (
      source text not null,
      path text not null,
      kind text not null,
      scope text not null,
      load_key text not null,
      part integer not null,
      day date,
      count bigint not null,
      primary key (source, path, kind, scope, load_key, part),
      foreign key (source, path, kind) references schema_drift on delete cascade
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists schema_drift_counts`.execute(db);
  await sql`drop table if exists schema_drift`.execute(db);
}
