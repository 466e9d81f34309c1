import { type Kysely, sql } from 'kysely';

/**
 * The `Message ID` of a quarantined export or file line, read by the loader from the whole line
 * as it streamed past. The delete step reads it from here instead of from `raw`: an over-long
 * line keeps only a prefix in `raw`, and the export writes the id after `Input` and `Response`,
 * so a long line's id was often beyond it, its row taken for absent and deleted.
 *
 * Existing rows are filled from `raw`, with the expression the delete step used until now (the
 * first `"Message ID": "<uuid>"` in the text); an over-long line whose id lay beyond its prefix
 * stays null, as nothing of it is left to read.
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('rejected_records').addColumn('message_id', 'uuid').execute();
  await sql`
    update rejected_records
    set message_id = substring(raw from '"Message ID"\\s*:\\s*"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"')::uuid
    where source in ('export', 'file') and raw ~ '"Message ID"'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('rejected_records').dropColumn('message_id').execute();
}
