import { type Kysely, sql } from 'kysely';

/**
 * How a reject stopped being open. `replayed_at` stays the one mark of a closed reject (every
 * count of open rejects reads it: status, sync_health, the gauges, the alerts); `resolution`
 * says how it closed, `replay_result` why:
 *
 * - `replayed`: loaded by `crs-sync rejects replay`, or its thread re-queued for enrichment;
 * - `dismissed`: closed by hand (`crs-sync rejects dismiss --reason`), the reason in `replay_result`;
 * - `gone`: a complete load of its day came without the line (the service corrected or dropped
 *   it; or the line loads now), so nothing is left to replay and its `open_rejects` would
 *   otherwise stay above 0 for ever.
 *
 * The open rejects of a day are looked up by each complete load of the day: an index for them.
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    alter table rejected_records add column resolution text
      check (resolution in ('replayed', 'dismissed', 'gone'))`.execute(db);
  await sql`update rejected_records set resolution = 'replayed' where replayed_at is not null`.execute(db);
  await sql`create index rejected_records_open_day_idx on rejected_records (day) where replayed_at is null`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists rejected_records_open_day_idx`.execute(db);
  await sql`alter table rejected_records drop column if exists resolution`.execute(db);
}
