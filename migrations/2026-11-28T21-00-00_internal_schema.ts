import { type Kysely, sql } from 'kysely';

/**
 * Bookkeeping out of the data schema, into `<schema>_internal` (docs/privacy.md, "Who can read
 * what"): a role given read access to the data schema (`crs-sync grant-reader`) sees the data,
 * the ledger BI needs (`sync_days`, `sync_runs`), the rollups and the views, and none of the
 * loader's state, the request budget, the alert state, the erasures, or the quarantine, whose
 * rows are whole lines as received.
 *
 * Every connection's search_path holds both schemas (src/warehouse/db.ts), so the code's
 * unqualified names find the tables where they are; views and triggers keep pointing at the
 * tables they were made with. `alter table … set schema` moves a table with its rows, indexes,
 * constraints and owned sequences: nothing is copied, nothing lost.
 *
 * What people read of the bookkeeping goes through views in the data schema, with no text of a
 * message and no quarantined line: the rollups' marks (which days and threads a reader must take
 * from the raw tables), the quarantine's and the held deletes' counts, when alerting began, how
 * the thread list's reads go.
 *
 * The migration tables (`kysely_migration*`) stay: the migrator reads them before any migration.
 * Frozen in time: never import application code here.
 */
const MOVED = [
  'alert_deliveries',
  'alert_incidents',
  'alert_settings',
  'freshness_sla',
  'held_deletes',
  'load_checkpoints',
  'load_day_counts',
  'load_day_deletes',
  'load_seen',
  'privacy_erasures',
  'privacy_key',
  'privacy_suppressions',
  'rate_budget',
  'rate_budget_request',
  'rejected_records',
  'rollup_dirty_days',
  'rollup_dirty_threads',
  'rollup_state',
  'rollup_waiting_days',
  'rollup_waiting_threads',
  'schema_drift',
  'schema_drift_counts',
  'thread_list_reads',
  'thread_queue',
];

const VIEWS = `
  create view rollup_marked_days as select day from rollup_dirty_days;
  create view rollup_marked_threads as select thread_id from rollup_dirty_threads;
  create view rollup_waiting as select day from rollup_waiting_days;
  create view rollup_upkeep as select rebuild_needed, rebuilt_at, refreshed_at from rollup_state;
  create view quarantine_counts as
    select source, error_code, day, count(*) filter (where replayed_at is null)::bigint as open,
           count(*) filter (where replayed_at is not null)::bigint as replayed
      from rejected_records group by source, error_code, day;
  create view held_delete_days as
    select day, count(*)::bigint as rows, max(held_at) as held_at from held_deletes group by day;
  create view alerting_since as select started_at from alert_settings;
  create view thread_list_health as
    select failures, failures_total, failing_since, last_ok_at, last_failed_at, last_error from thread_list_reads;
  create view schema_changes as
    with per_load as (
      select source, path, kind, scope, load_key, sum(count) as n
      from schema_drift_counts group by source, path, kind, scope, load_key
    ), totals as (
      select source, path, kind, sum(n) as n from (
        select source, path, kind, scope, max(n) as n from per_load group by source, path, kind, scope
      ) s group by source, path, kind
    )
    select d.source, d.path, d.kind, d.expected_type, d.actual_type, d.first_day, d.first_seen_at,
           d.last_seen_at, d.accepted_at, coalesce(t.n, 0)::bigint as count
    from schema_drift d left join totals t using (source, path, kind)`;

export async function up(db: Kysely<any>): Promise<void> {
  const [{ schema }] = (await sql<{ schema: string }>`select current_schema() as schema`.execute(db))
    .rows as [{ schema: string }];
  const internal = `${schema}_internal`;
  await sql`create schema if not exists ${sql.id(internal)}`.execute(db);
  for (const t of MOVED) await sql`alter table ${sql.id(t)} set schema ${sql.id(internal)}`.execute(db);
  // The triggers' and the budget's functions name bookkeeping tables: they find them whatever the
  // search_path of the session that fires them (a psql session set to the data schema alone).
  // Only the PL/pgSQL ones: a SQL function with a SET clause is no longer inlined into the views.
  const fns = await sql<{ fn: string }>`
    select p.oid::regprocedure::text as fn from pg_proc p join pg_language l on l.oid = p.prolang
     where p.pronamespace = current_schema()::regnamespace and l.lanname = 'plpgsql'`.execute(db);
  for (const { fn } of fns.rows)
    await sql`alter function ${sql.raw(fn)} set search_path = ${sql.id(schema)}, ${sql.id(internal)}, public`.execute(
      db,
    );
  // Created in the data schema (the first of the search_path), over the moved tables.
  for (const v of VIEWS.split(';')) if (v.trim() !== '') await sql.raw(v).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  const [{ schema }] = (await sql<{ schema: string }>`select current_schema() as schema`.execute(db))
    .rows as [{ schema: string }];
  for (const v of [
    'schema_changes',
    'thread_list_health',
    'alerting_since',
    'held_delete_days',
    'quarantine_counts',
    'rollup_upkeep',
    'rollup_waiting',
    'rollup_marked_threads',
    'rollup_marked_days',
  ])
    await sql`drop view if exists ${sql.id(v)}`.execute(db);
  for (const t of MOVED)
    await sql`alter table ${sql.id(`${schema}_internal`)}.${sql.id(t)} set schema ${sql.id(schema)}`.execute(
      db,
    );
}
