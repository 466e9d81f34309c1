import type { Kysely } from 'kysely';

/**
 * The sha1 of the export line a row was loaded from. A re-load whose line has the same bytes is
 * unchanged without parsing the line again (parsing and hashing the normalised record are most of
 * a re-load's CPU); a line with other bytes is parsed and compared by record_hash as before.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('analytics_messages').addColumn('line_hash', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('analytics_messages').dropColumn('line_hash').execute();
}
