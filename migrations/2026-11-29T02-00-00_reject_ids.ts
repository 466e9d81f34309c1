import { type Kysely, sql } from 'kysely';

/**
 * The `User ID` of a quarantined export or file line (`user_id`), and its `Thread ID` in the
 * column history and artifact rejects already fill (`thread_id`), read by the loader from the
 * whole line as its `Message ID` is. `crs-sync forget` finds a reject by them: an over-long line
 * keeps only a 64 KiB prefix in `raw`, and the export writes the ids after `Input` and
 * `Response`, so the text search found nothing of a long line's ids, and the row kept the
 * person's text after their erasure.
 *
 * Existing rows are not filled: an over-long line's ids beyond its prefix are gone, and the rest
 * are found by the text search as before. A row the loader reads again (its line in a later load
 * of its day) gets its ids then (src/warehouse/load/batch.ts).
 * Personal ids, in the internal schema (the reader role does not see it).
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('rejected_records').addColumn('user_id', 'uuid').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`update rejected_records set thread_id = null where source in ('export', 'file')`.execute(db);
  await db.schema.alterTable('rejected_records').dropColumn('user_id').execute();
}
