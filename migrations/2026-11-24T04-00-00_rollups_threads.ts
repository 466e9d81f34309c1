import { type Kysely, sql } from 'kysely';

/**
 * An index for the dashboard's enrichment backlog (src/dashboard/queries.ts `enrichmentBacklog`;
 * docs/decisions/0010-rollups-and-partitioning.md, "Thread status").
 *
 * `threads (enrich_status, enrich_requested_at)`: the backlog's counts by status and its oldest
 * pending request come from one ordered index-only pass instead of a scan of the whole table
 * (bench:bi at 1.25M threads: 204 ms to 65 ms). An index, not a rollup of counts by status: it is
 * exact by construction, and a counter row per status would make concurrent enrichment batches
 * wait for each other's commit. Updates of `enrich_status` already skip HOT (the pending index's
 * predicate reads it), so the index adds one entry per update, nothing more.
 *
 * Covering indexes for `threadBreakdown`'s probes of `threads` and `rollup_threads` were measured
 * and left out: PostgreSQL hash-joins the ~100k threads of 30 days against both whole tables
 * anyway (620 ms with or without them).
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index threads_status_requested_idx on threads (enrich_status, enrich_requested_at)`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists threads_status_requested_idx`.execute(db);
}
