import { type Kysely, sql } from 'kysely';

/**
 * `thread_list_reads`: how the enrichment's reads of the thread list went (src/enrich/thread-names.ts
 * writes it after each read, from any worker). A read that fails leaves thread names as they
 * were and re-queues no thread whose history grew: enrichment goes on without it, so the failure
 * was seen only in a worker's log. Kept here, it shows in `crs-sync status` and opens the
 * `enrichment_stalled` alert while the last read failed.
 *
 * One row: `failures` and `failing_since` count the failed reads since the last one that worked
 * (0 and null after a read that worked), `failures_total` every failed read.
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table thread_list_reads (
      one boolean primary key default true check (one),
      last_ok_at timestamptz,
      last_failed_at timestamptz,
      failing_since timestamptz,
      failures integer not null default 0,
      failures_total bigint not null default 0,
      last_error text
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table thread_list_reads`.execute(db);
}
