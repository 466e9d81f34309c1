import { type Kysely, sql } from 'kysely';

/**
 * Threads touched by a load are first appended to thread_queue inside each batch transaction
 * (plain inserts never wait on each other), and moved into `threads` once per load. Upserting
 * `threads` in every batch made the loader's parallel partitions queue behind each other's row
 * locks on the same threads until commit.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('thread_queue')
    .addColumn('thread_id', 'uuid', (c) => c.notNull())
    .addColumn('user_id', 'uuid')
    .addColumn('load_id', 'text', (c) => c.notNull())
    .addColumn('queued_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('thread_queue').ifExists().execute();
}
