import type { ColumnType, Generated, Insertable, Kysely, Selectable, Transaction } from 'kysely';

/** kysely types of the warehouse (docs/data-dictionary.md); the schema is the connection's search_path. */

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type GeneratedTimestamp = ColumnType<Date, Date | string | undefined, Date | string>;
/** `date` columns come back as 'YYYY-MM-DD' strings (see db.ts: the pg type parser is set so). */
type DateText = ColumnType<string, string, string>;
/** bigint columns are parsed to numbers (see db.ts): counts here stay far below 2^53. */
type Count = ColumnType<number, number | undefined, number>;
type Json = ColumnType<unknown, string | undefined | null, string | null>;

export type EnrichStatus = 'pending' | 'done' | 'deleted' | 'forbidden' | 'failed';
export type RunKind = 'scheduled' | 'backfill' | 'manual' | 'import' | 'replay' | 'intraday';
export type RunStatus = 'running' | 'succeeded' | 'failed' | 'cancelled' | 'abandoned';
/** `partial`: the open UTC day, pulled by an intraday run: loaded so far, never complete, nothing deleted. */
export type DayStatus = 'pending' | 'running' | 'complete' | 'failed' | 'partial';
export type RejectSource = 'export' | 'history' | 'artifact' | 'file';

export interface AnalyticsMessagesTable {
  message_id: string;
  thread_id: string;
  user_id: string;
  message_time: Timestamp;
  message_date: DateText;
  input: string;
  response: string;
  extra: Json;
  record_hash: string;
  _source_line: Count;
  _load_id: string;
  _loaded_at: GeneratedTimestamp;
  _first_loaded_at: GeneratedTimestamp;
  _deleted_at: Timestamp | null;
  /** sha1 of the source line's bytes (migration T03); null for rows loaded before it. */
  line_hash: string | null;
  /** Characters of `response` without surrounding white space; written by the loader (T04). */
  response_chars: number;
}

export interface ThreadsTable {
  thread_id: string;
  thread_name: string | null;
  user_id: string | null;
  first_message_at: Timestamp | null;
  last_message_at: Timestamp | null;
  message_count: Generated<number>;
  enrich_status: ColumnType<EnrichStatus, EnrichStatus | undefined, EnrichStatus>;
  enrich_requested_at: Timestamp | null;
  enriched_at: Timestamp | null;
  history_count: Generated<number>;
  enrich_attempts: Generated<number>;
  last_error: string | null;
  _load_id: string | null;
  _loaded_at: GeneratedTimestamp;
}

export interface ThreadMessagesTable {
  message_id: string;
  thread_id: string;
  position: number;
  role: string | null;
  text: string | null;
  created_at: Timestamp | null;
  is_cancelled: Generated<boolean>;
  raw: Json;
  _load_id: string | null;
  _loaded_at: GeneratedTimestamp;
}

export interface CitationsTable {
  owner_kind: 'message' | 'artifact';
  owner_id: string;
  ordinal: number;
  message_id: string | null;
  artifact_id: string | null;
  thread_id: string;
  citation_id: string | null;
  internal_id: string | null;
  citation_type: string | null;
  name: string | null;
  inline_offset: number | null;
  summary: string | null;
  last_updated_at: Timestamp | null;
  is_snippet: boolean | null;
  extra: Json;
  _load_id: string | null;
  _loaded_at: GeneratedTimestamp;
}

export interface ArtifactsTable {
  artifact_id: string;
  thread_id: string;
  message_id: string | null;
  output_type: string | null;
  title: string | null;
  val: string | null;
  val_json: Json;
  resolved_text_objects: boolean | null;
  raw: Json;
  fetched_via: 'v2' | 'legacy';
  _load_id: string | null;
  _loaded_at: GeneratedTimestamp;
}

interface Counters {
  rows_read: Count;
  rows_inserted: Count;
  rows_updated: Count;
  rows_unchanged: Count;
  rows_rejected: Count;
  /** Lines dropped because `crs-sync forget` erased their user or thread (migration 2026-11-28T22). */
  rows_suppressed: Count;
}

export interface SyncRunsTable extends Counters {
  load_id: string;
  kind: RunKind;
  window_start: DateText | null;
  window_end: DateText | null;
  source: string | null;
  workflow_id: string | null;
  status: ColumnType<RunStatus, RunStatus | undefined, RunStatus>;
  rows_deleted: Count;
  bytes_read: Count;
  started_at: GeneratedTimestamp;
  finished_at: Timestamp | null;
  error: string | null;
  /** Last sign of life of the run (migration 2026-11-24T01): its start and its activities' heartbeats. */
  progress_at: GeneratedTimestamp;
}

export interface SyncDaysTable extends Counters {
  day: DateText;
  status: ColumnType<DayStatus, DayStatus | undefined, DayStatus>;
  rows_deleted: Count;
  bytes: Count;
  export_checksum: string | null;
  lines_committed: Count;
  attempts: Generated<number>;
  started_at: Timestamp | null;
  finished_at: Timestamp | null;
  /**
   * When the last intraday pull of the day finished (migration 2026-11-25T11); a complete load
   * leaves it. Kept while the next pull runs or after one fails, unlike `finished_at`.
   */
  pulled_at: ColumnType<Date | null, never, never>;
  last_error: string | null;
  /**
   * The attempt number of the day's current or last load: Temporal's activity attempt number, 1
   * for a load outside Temporal (migration 2026-11-28T10). `attempts` counts every attempt of every load.
   */
  attempt: Generated<number>;
  /** The current load's retry limit (its activity's retry policy); null: none known. */
  max_attempts: number | null;
  /** The code of `last_error` (a CrsError code, or the failure's type) and when it happened. */
  last_error_code: string | null;
  last_error_at: Timestamp | null;
  /** When Temporal runs the next attempt of the day's load; null unless one is awaited. */
  next_attempt_at: Timestamp | null;
  _load_id: string | null;
  _loaded_at: GeneratedTimestamp;
  /** Last sign of life of the day's load (its start and its heartbeats; batch commits: load_checkpoints). */
  progress_at: Timestamp | null;
  /** The load that left this day `running` (it died or was terminated) when the current one began. */
  taken_over_from: string | null;
  /** Whether the last load's export was known complete; null for loads before the delete guard. */
  export_complete: boolean | null;
  export_incomplete_reason: string | null;
  /** Soft-deletes the guard held back (rows in held_deletes) and why. */
  deletes_held: Count;
  deletes_held_reason: string | null;
  /** Why `crs-sync deletes apply` applies the held deletes only when the day is named with --force. */
  deletes_force_reason: string | null;
}

export interface HeldDeletesTable {
  day: DateText;
  message_id: string;
  load_id: string;
  held_at: GeneratedTimestamp;
}

export interface LoadSeenTable {
  load_key: string;
  message_id: string;
}

/** Soft-deletes of a load per day, committed with the deletes (a retried finalize keeps them). */
export interface LoadDayDeletesTable {
  load_key: string;
  day: DateText;
  rows_deleted: Count;
}

export interface LoadCheckpointsTable extends Counters {
  load_key: string;
  part: number;
  parts: number;
  lines_committed: Count;
  updated_at: GeneratedTimestamp;
}

export interface LoadDayCountsTable {
  load_key: string;
  part: number;
  day: DateText;
  rows_read: Count;
  rows_inserted: Count;
  rows_updated: Count;
  rows_unchanged: Count;
  /** Lines of the day the load quarantined (migration 2026-11-28T14). */
  rows_rejected: Count;
}

export interface RejectedRecordsTable {
  id: Generated<string>;
  _load_id: string;
  source: RejectSource;
  source_name: string | null;
  day: DateText | null;
  thread_id: string | null;
  line_no: Count | null;
  raw: string;
  raw_bytes: Buffer | null;
  raw_length: Count | null;
  error_code: string;
  error_detail: string;
  received_at: GeneratedTimestamp;
  /** Export and file lines: the line's `Message ID`, where it could be read (the whole line, not only `raw`). */
  message_id: string | null;
  /**
   * Export and file lines: the line's `User ID` (as user ids are stored), where it could be read
   * from the whole line; `thread_id` holds its `Thread ID` so. `crs-sync forget` finds the reject by them.
   */
  user_id: string | null;
  /** When it stopped being open (replayed, dismissed or gone): null while open. */
  replayed_at: Timestamp | null;
  replay_result: string | null;
  /**
   * Export and file lines: what makes them the same line, with `source` and `day` (SHA-256 of the
   * exact bytes, src/ingest/merge/pending.ts `rejectDigest`); one open reject per line. Null for history
   * and artifact rejects.
   */
  line_digest: Buffer | null;
  /** Loads that read the line while this reject was open (the first included). */
  times_seen: Count;
  /** The last load that read it (the first, `_load_id`, until another does; set by a trigger when left out). */
  last_load_id: ColumnType<string, string | undefined, string>;
  last_seen_at: GeneratedTimestamp;
  /** How it closed (RejectResolution); null while open. */
  resolution: RejectResolution | null;
}

/** How a reject closed: loaded again (or its thread re-queued), closed by hand, or its line left a complete load of its day. */
export type RejectResolution = 'replayed' | 'dismissed' | 'gone';

/** One schema drift: a source's field that differs from the known contract (schema-drift.ts). */
export interface SchemaDriftTable {
  source: 'export' | 'thread' | 'history' | 'artifact';
  path: string;
  kind: 'new_field' | 'missing_field' | 'type_changed';
  expected_type: string | null;
  actual_type: string | null;
  /** The first value seen, at most 60 characters, credentials masked. */
  example: string | null;
  first_day: DateText | null;
  first_seen_at: GeneratedTimestamp;
  last_seen_at: GeneratedTimestamp;
  /** When an operator widened the contract by it (`crs-sync schema accept`); null while open. */
  accepted_at: Timestamp | null;
}

/** The counts of a drift, per scope (a day, an entity), load key and partition. */
export interface SchemaDriftCountsTable {
  source: string;
  path: string;
  kind: string;
  scope: string;
  load_key: string;
  part: number;
  day: DateText | null;
  count: Count;
}

/**
 * A limit the callers of a shared request budget asked for, and when last (rate_budget_lease
 * writes it; the budget counts against the lowest asked within 10 minutes, a fixed one first).
 */
export interface RateBudgetRequestTable {
  name: string;
  limit_per_window: number;
  window_ms: number;
  /** Asked as the deployment's limit (CRS_SHARED_BUDGET_RPS), not a worker's own. */
  fixed: boolean;
  asked_at: Timestamp;
}

export type AlertState = 'firing' | 'resolved';
export type AlertSeverity = 'critical' | 'warning' | 'info';

/** An alert's incident: one condition (its `key`) from when it was seen until it cleared (migration T06 of 11-25). */
export interface AlertIncidentsTable {
  /** The incident's stable id: its key and the moment it opened. */
  incident: string;
  /** The condition, e.g. `day_failed:2026-11-20`: at most one open incident per key. */
  key: string;
  kind: string;
  severity: AlertSeverity;
  summary: string;
  details: Json;
  opened_at: GeneratedTimestamp;
  last_seen_at: GeneratedTimestamp;
  resolved_at: Timestamp | null;
  firing_notified_at: Timestamp | null;
  resolved_notified_at: Timestamp | null;
}

/** One message to send: an incident's state to one receiver (a digest of its URL). */
export interface AlertDeliveriesTable {
  incident: string;
  state: AlertState;
  target: string;
  created_at: GeneratedTimestamp;
  attempts: Generated<number>;
  next_attempt_at: GeneratedTimestamp;
  /** A sender's lease on the row: nobody else sends it before then. */
  claimed_until: Timestamp | null;
  sent_at: Timestamp | null;
  last_status: number | null;
  last_error: string | null;
}

/**
 * The deployment's freshness SLA (CRS_FRESHNESS_SLA) that the alert checks and `sync_health` judge
 * by: stored by the first check, replaced by `crs-sync alerts settings --store` (alert-settings.ts).
 */
export interface FreshnessSlaTable {
  one: Generated<boolean>;
  sla_seconds: number;
  updated_at: GeneratedTimestamp;
}

/**
 * How the enrichment's reads of the thread list went (one row; migration 2026-11-28T13-00-00):
 * `failures` and `failing_since` count the failed reads since the last that worked.
 */
export interface ThreadListReadsTable {
  one: Generated<boolean>;
  last_ok_at: Date | null;
  last_failed_at: Date | null;
  failing_since: Date | null;
  failures: Count;
  failures_total: Count;
  last_error: string | null;
}

/** The deployment's other alert settings and its first check (one row; alert-settings.ts). */
export interface AlertSettingsTable {
  one: Generated<boolean>;
  /** CRS_ALERT_QUARANTINE_SHARE as stored; null only in a row a migration made. */
  quarantine_share: number | null;
  /** CRS_ALERT_BUDGET_WAIT as stored (ms). */
  budget_wait_ms: number | null;
  /** The first check: a new deployment's first day is due one SLA after it (`no_data` until then). */
  started_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
}

/** Read only: a view's columns are never written. */
type ViewColumn<T> = ColumnType<T, never, never>;

/**
 * The view `run_liveness`: every run's last sign of life and whether it is abandoned (the one
 * definition of the rule, with `abandoned_after()`; `sync_health` counts from it too).
 */
export interface RunLivenessView {
  load_id: ViewColumn<string>;
  /** Its `progress_at` or its load's last batch commit, the later. */
  alive_at: ViewColumn<Date>;
  /** Marked `abandoned`, or `running` with no sign of life for `abandoned_after()`. */
  abandoned: ViewColumn<boolean>;
}

/** The view `day_liveness`: every ledger day's last sign of life and whether it is abandoned. */
export interface DayLivenessView {
  day: ViewColumn<string>;
  load_id: ViewColumn<string | null>;
  /** Its `progress_at` or its load's last batch commit of the day, the later; null with neither. */
  alive_at: ViewColumn<Date | null>;
  /** `running` with no sign of life for `abandoned_after()` (or none at all). */
  abandoned: ViewColumn<boolean>;
}

export interface Database {
  analytics_messages: AnalyticsMessagesTable;
  threads: ThreadsTable;
  thread_messages: ThreadMessagesTable;
  citations: CitationsTable;
  artifacts: ArtifactsTable;
  sync_runs: SyncRunsTable;
  sync_days: SyncDaysTable;
  load_checkpoints: LoadCheckpointsTable;
  load_day_counts: LoadDayCountsTable;
  load_day_deletes: LoadDayDeletesTable;
  rejected_records: RejectedRecordsTable;
  held_deletes: HeldDeletesTable;
  load_seen: LoadSeenTable;
  rate_budget_request: RateBudgetRequestTable;
  alert_incidents: AlertIncidentsTable;
  alert_deliveries: AlertDeliveriesTable;
  freshness_sla: FreshnessSlaTable;
  thread_list_reads: ThreadListReadsTable;
  alert_settings: AlertSettingsTable;
  schema_drift: SchemaDriftTable;
  schema_drift_counts: SchemaDriftCountsTable;
  run_liveness: RunLivenessView;
  day_liveness: DayLivenessView;
}

/** What a repository function runs on: the pool's kysely or one of its transactions (kysely's style). */
export type Executor = Kysely<Database> | Transaction<Database>;

export type AnalyticsMessage = Selectable<AnalyticsMessagesTable>;
export type Thread = Selectable<ThreadsTable>;
export type NewThreadMessage = Insertable<ThreadMessagesTable>;
export type NewCitation = Insertable<CitationsTable>;
export type NewArtifact = Insertable<ArtifactsTable>;
export type SyncDay = Selectable<SyncDaysTable>;
export type SyncRun = Selectable<SyncRunsTable>;
export type RejectedRecord = Selectable<RejectedRecordsTable>;
export type NewRejectedRecord = Insertable<RejectedRecordsTable>;
