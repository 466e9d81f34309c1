import { type Kysely, sql } from 'kysely';

/**
 * The ledger's `rows_deleted` is the day's rows marked deleted, counted whenever a day's ledger
 * row is written (held-deletes migration, 2026-11-25T00). Through the date index that count
 * visits every row of the day to read `_deleted_at`: a 1M-row first load paid a heap visit per
 * row in its finalize. A partial index holds only deleted rows (a handful a day), so the count
 * reads them alone, and a live row never enters it (no cost to a load's inserts).
 *
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create index if not exists analytics_messages_deleted_date_idx
      on analytics_messages (message_date) where _deleted_at is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists analytics_messages_deleted_date_idx`.execute(db);
}
