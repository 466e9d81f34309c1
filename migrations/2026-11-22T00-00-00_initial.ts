import { type Kysely, sql } from 'kysely';

/**
 * The warehouse (docs/data-dictionary.md). Tables are created unqualified: the connection's search_path is
 * the configured schema (CRS_SCHEMA), so one migration serves any schema name.
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('analytics_messages')
    .addColumn('message_id', 'uuid', (c) => c.primaryKey())
    .addColumn('thread_id', 'uuid', (c) => c.notNull())
    .addColumn('user_id', 'uuid', (c) => c.notNull())
    .addColumn('message_time', 'timestamptz', (c) => c.notNull())
    .addColumn('message_date', 'date', (c) => c.notNull())
    .addColumn('input', 'text', (c) => c.notNull())
    .addColumn('response', 'text', (c) => c.notNull())
    .addColumn('extra', 'jsonb')
    .addColumn('record_hash', 'text', (c) => c.notNull())
    // Line of the source that wrote the row, so a later line of the same load wins.
    .addColumn('_source_line', 'bigint', (c) => c.notNull())
    .addColumn('_load_id', 'text', (c) => c.notNull())
    .addColumn('_loaded_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('_first_loaded_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('_deleted_at', 'timestamptz')
    .execute();
  await db.schema
    .createIndex('analytics_messages_date_idx')
    .on('analytics_messages')
    .column('message_date')
    .execute();
  await db.schema
    .createIndex('analytics_messages_thread_idx')
    .on('analytics_messages')
    .column('thread_id')
    .execute();
  await db.schema
    .createIndex('analytics_messages_user_date_idx')
    .on('analytics_messages')
    .columns(['user_id', 'message_date'])
    .execute();

  await db.schema
    .createTable('threads')
    .addColumn('thread_id', 'uuid', (c) => c.primaryKey())
    .addColumn('thread_name', 'text')
    .addColumn('user_id', 'uuid')
    .addColumn('first_message_at', 'timestamptz')
    .addColumn('last_message_at', 'timestamptz')
    .addColumn('message_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('enrich_status', 'text', (c) =>
      c
        .notNull()
        .defaultTo('pending')
        .check(sql`enrich_status in ('pending', 'done', 'deleted', 'forbidden', 'failed')`),
    )
    .addColumn('enrich_requested_at', 'timestamptz')
    .addColumn('enriched_at', 'timestamptz')
    .addColumn('history_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('enrich_attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_error', 'text')
    .addColumn('_load_id', 'text')
    .addColumn('_loaded_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`create index threads_pending_idx on threads (thread_id) where enrich_status = 'pending'`.execute(
    db,
  );

  await db.schema
    .createTable('thread_messages')
    .addColumn('message_id', 'uuid', (c) => c.primaryKey())
    .addColumn('thread_id', 'uuid', (c) => c.notNull())
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('role', 'text')
    .addColumn('text', 'text')
    .addColumn('created_at', 'timestamptz')
    .addColumn('is_cancelled', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('raw', 'jsonb', (c) => c.notNull())
    .addColumn('_load_id', 'text')
    .addColumn('_loaded_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createIndex('thread_messages_thread_pos_idx')
    .on('thread_messages')
    .columns(['thread_id', 'position'])
    .execute();

  await db.schema
    .createTable('citations')
    // owner_kind + owner_id + ordinal: a citation is the n-th of a message or of an artifact.
    .addColumn('owner_kind', 'text', (c) => c.notNull().check(sql`owner_kind in ('message', 'artifact')`))
    .addColumn('owner_id', 'text', (c) => c.notNull())
    .addColumn('ordinal', 'integer', (c) => c.notNull())
    .addColumn('message_id', 'uuid')
    .addColumn('artifact_id', 'text')
    .addColumn('thread_id', 'uuid', (c) => c.notNull())
    .addColumn('citation_id', 'text')
    .addColumn('internal_id', 'text')
    .addColumn('citation_type', 'text')
    .addColumn('name', 'text')
    .addColumn('inline_offset', 'integer')
    .addColumn('summary', 'text')
    .addColumn('last_updated_at', 'timestamptz')
    .addColumn('is_snippet', 'boolean')
    .addColumn('extra', 'jsonb')
    .addColumn('_load_id', 'text')
    .addColumn('_loaded_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('citations_pk', ['owner_kind', 'owner_id', 'ordinal'])
    .execute();
  await db.schema.createIndex('citations_thread_idx').on('citations').column('thread_id').execute();
  await db.schema
    .createIndex('citations_type_name_idx')
    .on('citations')
    .columns(['citation_type', 'name'])
    .execute();

  await db.schema
    .createTable('artifacts')
    .addColumn('artifact_id', 'text', (c) => c.primaryKey())
    .addColumn('thread_id', 'uuid', (c) => c.notNull())
    .addColumn('message_id', 'uuid')
    .addColumn('output_type', 'text')
    .addColumn('title', 'text')
    .addColumn('val', 'text')
    .addColumn('val_json', 'jsonb')
    .addColumn('resolved_text_objects', 'boolean')
    .addColumn('raw', 'jsonb', (c) => c.notNull())
    .addColumn('fetched_via', 'text', (c) => c.notNull().check(sql`fetched_via in ('v2', 'legacy')`))
    .addColumn('_load_id', 'text')
    .addColumn('_loaded_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('artifacts_thread_idx').on('artifacts').column('thread_id').execute();

  await db.schema
    .createTable('sync_runs')
    .addColumn('load_id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) =>
      c.notNull().check(sql`kind in ('scheduled', 'backfill', 'manual', 'import', 'replay')`),
    )
    .addColumn('window_start', 'date')
    .addColumn('window_end', 'date')
    .addColumn('source', 'text')
    .addColumn('workflow_id', 'text')
    .addColumn('status', 'text', (c) =>
      c.notNull().defaultTo('running').check(sql`status in ('running', 'succeeded', 'failed', 'cancelled')`),
    )
    .addColumn('rows_read', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_inserted', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_updated', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_unchanged', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_rejected', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_deleted', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('bytes_read', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('started_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .addColumn('error', 'text')
    .execute();

  await db.schema
    .createTable('sync_days')
    .addColumn('day', 'date', (c) => c.primaryKey())
    .addColumn('status', 'text', (c) =>
      c.notNull().defaultTo('pending').check(sql`status in ('pending', 'running', 'complete', 'failed')`),
    )
    .addColumn('rows_read', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_inserted', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_updated', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_unchanged', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_rejected', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_deleted', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('bytes', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('export_checksum', 'text')
    .addColumn('lines_committed', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('started_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .addColumn('last_error', 'text')
    .addColumn('_load_id', 'text')
    .addColumn('_loaded_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  // The checkpoint of one load, one row per key partition. Each batch transaction advances its
  // partition's row, so resuming skips exactly the lines already merged and the counters come
  // out as if the load had never stopped.
  await db.schema
    .createTable('load_checkpoints')
    .addColumn('load_key', 'text', (c) => c.notNull())
    .addColumn('part', 'integer', (c) => c.notNull())
    .addColumn('parts', 'integer', (c) => c.notNull())
    .addColumn('lines_committed', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_read', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_inserted', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_updated', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_unchanged', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_rejected', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('load_checkpoints_pk', ['load_key', 'part'])
    .execute();
  // Per-day counters of a load, per partition (a file may hold many days).
  await db.schema
    .createTable('load_day_counts')
    .addColumn('load_key', 'text', (c) => c.notNull())
    .addColumn('part', 'integer', (c) => c.notNull())
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('rows_read', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_inserted', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_updated', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('rows_unchanged', 'bigint', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('load_day_counts_pk', ['load_key', 'part', 'day'])
    .execute();

  await db.schema
    .createTable('rejected_records')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('_load_id', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) =>
      c.notNull().check(sql`source in ('export', 'history', 'artifact', 'file')`),
    )
    .addColumn('source_name', 'text')
    .addColumn('day', 'date')
    .addColumn('thread_id', 'uuid')
    .addColumn('line_no', 'bigint')
    // The line as received. Bytes that are not valid UTF-8, contain NUL, or exceed the line limit
    // (a prefix) are kept exactly in raw_bytes, and raw holds a readable rendering of them.
    .addColumn('raw', 'text', (c) => c.notNull())
    .addColumn('raw_bytes', 'bytea')
    .addColumn('raw_length', 'bigint')
    .addColumn('error_code', 'text', (c) => c.notNull())
    .addColumn('error_detail', 'text', (c) => c.notNull())
    .addColumn('received_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('replayed_at', 'timestamptz')
    .addColumn('replay_result', 'text')
    .execute();
  // A retried batch must not quarantine the same line twice.
  await sql`create unique index rejected_records_line_uq on rejected_records (_load_id, source, coalesce(source_name, ''), line_no) where line_no is not null`.execute(
    db,
  );
  await db.schema
    .createIndex('rejected_records_open_idx')
    .on('rejected_records')
    .columns(['error_code'])
    .where(sql.ref('replayed_at'), 'is', null)
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of [
    'rejected_records',
    'load_day_counts',
    'load_checkpoints',
    'sync_days',
    'sync_runs',
    'artifacts',
    'citations',
    'thread_messages',
    'threads',
    'analytics_messages',
  ]) {
    await db.schema.dropTable(t).ifExists().execute();
  }
}
