import { type Kysely, sql } from 'kysely';

/**
 * `rows_suppressed`: lines a load dropped because `crs-sync forget` erased their user or thread
 * (docs/privacy.md). Counted like the others: per batch with the checkpoint and per day
 * (`load_checkpoints`, `load_day_counts`, so a resumed load reports them again), and in the
 * ledger (`sync_days`, `sync_runs`). They are neither inserts nor deletes: the rows do not exist.
 * `rows_read` includes them, as it includes rejected lines.
 *
 * Frozen in time: never import application code here.
 */
const TABLES = ['load_checkpoints', 'load_day_counts', 'sync_days', 'sync_runs'];

export async function up(db: Kysely<any>): Promise<void> {
  for (const t of TABLES)
    await sql`alter table ${sql.id(t)} add column rows_suppressed bigint not null default 0`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of TABLES)
    await sql`alter table ${sql.id(t)} drop column if exists rows_suppressed`.execute(db);
}
