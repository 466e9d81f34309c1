import { type Kysely, sql } from 'kysely';

/**
 * Held deletes that a later load saw, and the rollups after a TRUNCATE.
 *
 * - `sync_days.deletes_force_reason`: why `crs-sync deletes apply` applies the day's held deletes
 *   only when the operator names the day with --force (a quarantined line whose id could not be
 *   read may be one of them); null when apply may apply them.
 * - `load_seen` gets an index on (load_key, message_id): a load's finalize probes it for the held
 *   ids it saw, and the start of a load lists its load keys (a loose index scan) to remove those of
 *   loads that died.
 * - A statement-level `before truncate` trigger on every raw table the rollups read flags them
 *   `rebuild_needed`: a TRUNCATE fires no row trigger, so it left no mark and the rollups stayed
 *   "current" while counting rows that were gone.
 *
 * Frozen in time: never import application code here.
 */
const RAW_TABLES = ['analytics_messages', 'thread_messages', 'citations', 'artifacts', 'threads'];

export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table sync_days add column deletes_force_reason text`.execute(db);
  await sql`create index load_seen_key_id on load_seen (load_key, message_id)`.execute(db);
  await sql`
    create function rollup_mark_truncated() returns trigger language plpgsql as $$
    begin
      update rollup_state set rebuild_needed = true;
      return null;
    end $$`.execute(db);
  for (const table of RAW_TABLES) {
    await sql`
      create trigger ${sql.id(`${table}_rollup_truncate`)} before truncate on ${sql.id(table)}
      for each statement execute function rollup_mark_truncated()`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of RAW_TABLES) {
    await sql`drop trigger if exists ${sql.id(`${table}_rollup_truncate`)} on ${sql.id(table)}`.execute(db);
  }
  await sql`drop function if exists rollup_mark_truncated()`.execute(db);
  await sql`drop index if exists load_seen_key_id`.execute(db);
  await sql`alter table sync_days drop column if exists deletes_force_reason`.execute(db);
}
