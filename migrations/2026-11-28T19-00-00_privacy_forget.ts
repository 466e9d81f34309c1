import { type Kysely, sql } from 'kysely';

/**
 * `crs-sync forget`: people and threads erased for good.
 *
 * - `privacy_key`: one row, the deployment's key for the suppression list's hashes (32 random
 *   bytes written by the first `forget`, never by a migration: a migration has no good source of
 *   randomness in SQL). The list holds HMAC-SHA256(key, kind:id), never the plain id, so reading
 *   the list alone does not tell who was erased.
 * - `privacy_suppressions`: what every later load and enrichment drops, by keyed hash. A load's
 *   batch reads it under a SHARE lock held to its commit, and `forget` adds to it under a lock that
 *   conflicts with that one, so a batch either committed before the erasure (and the erasure
 *   removes its rows) or reads the new entries (and drops the lines).
 * - `privacy_erasures`: one row per `forget`: when, why, how many ids of each kind and the rows
 *   erased per table; no plain id.
 *
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table privacy_key (
      one boolean primary key default true check (one),
      key bytea not null check (octet_length(key) = 32),
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table privacy_erasures (
      id bigserial primary key,
      erased_at timestamptz not null default now(),
      reason text,
      users integer not null,
      threads integer not null,
      rows_erased jsonb not null
    )`.execute(db);
  await sql`
    create table privacy_suppressions (
      kind text not null check (kind in ('user', 'thread')),
      key_hash bytea not null check (octet_length(key_hash) = 32),
      erasure_id bigint not null references privacy_erasures (id),
      primary key (kind, key_hash)
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists privacy_suppressions`.execute(db);
  await sql`drop table if exists privacy_erasures`.execute(db);
  await sql`drop table if exists privacy_key`.execute(db);
}
