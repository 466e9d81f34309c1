/**
 * The sync's health now (the ledger's small tables, the same whatever the source): the
 * `sync_health` view, the ledger's days, failed days, held deletes, the quarantine by code, the
 * enrichment backlog.
 */
import { type DayRange, type Queryable, rowsOf, TOP_N } from './queryable.ts';

export interface SyncHealth {
  watermark: string | null;
  lagDays: number | null;
  firstDay: string | null;
  lastDay: string | null;
  daysComplete: number;
  failedDays: number;
  runningDays: number;
  pendingDays: number;
  lastRunLoadId: string | null;
  lastRunKind: string | null;
  lastRunStatus: string | null;
  lastRunStartedAt: string | null;
  lastRunFinishedAt: string | null;
  lastSuccessAt: string | null;
  openRejects: number;
  threadsPending: number;
  threadsFailed: number;
  heldDeletes: number;
  heldDeleteDays: number;
  incompleteExportDays: number;
  /** Days running whose load failed an attempt and is retried (counted in runningDays too). */
  retryingDays: number;
}

/** The one row of the `sync_health` view. */
export async function syncHealth(q: Queryable): Promise<SyncHealth> {
  const [h] = await rowsOf<SyncHealth>(
    q,
    `select watermark::text as watermark, lag_days as "lagDays", first_day::text as "firstDay",
            last_day::text as "lastDay", complete_days as "daysComplete", failed_days as "failedDays",
            running_days as "runningDays", pending_days as "pendingDays",
            last_run_load_id as "lastRunLoadId", last_run_kind as "lastRunKind", last_run_status as "lastRunStatus",
            to_json(last_run_started_at)#>>'{}' as "lastRunStartedAt",
            to_json(last_run_finished_at)#>>'{}' as "lastRunFinishedAt",
            to_json(last_success_at)#>>'{}' as "lastSuccessAt", open_rejects as "openRejects",
            threads_pending as "threadsPending", threads_failed as "threadsFailed",
            held_deletes as "heldDeletes", held_delete_days as "heldDeleteDays",
            incomplete_export_days as "incompleteExportDays", retrying_days as "retryingDays"
       from sync_health`,
  );
  if (!h) throw new Error('the sync_health view returned no row');
  return h;
}

export interface LedgerDay {
  day: string;
  status: string;
  rowsRead: number;
  inserted: number;
  updated: number;
  rejected: number;
  /** Lines dropped because `crs-sync forget` erased their user or thread. */
  suppressed: number;
  deleted: number;
  attempts: number;
  /** When the day's last load ended (or its last attempt failed). */
  finishedAt: string | null;
  /** For a `partial` day (the open day, pulled intraday): when its last pull finished; null: none yet. */
  pulledAt: string | null;
}

/** The ledger's days in the range, newest first. */
export async function ledgerDays(q: Queryable, r: DayRange): Promise<LedgerDay[]> {
  return rowsOf<LedgerDay>(
    q,
    `select day::text as day, status, rows_read as "rowsRead", rows_inserted as inserted,
            rows_updated as updated, rows_rejected as rejected, rows_suppressed as suppressed,
            rows_deleted as deleted, attempts,
            to_char(finished_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as "finishedAt",
            to_char(pulled_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as "pulledAt"
       from sync_days where day between $1::date and $2::date order by day desc`,
    [r.from, r.to],
  );
}

/**
 * The days of the range the ledger holds as `partial`: the open UTC day, pulled intraday, whose
 * figures grow until it closes. The charts over days mark them (src/dashboard/pages/shared.ts).
 */
export async function partialDaysIn(q: Queryable, r: DayRange): Promise<string[]> {
  const rows = await rowsOf<{ day: string }>(
    q,
    `select day::text as day from sync_days
      where status = 'partial' and day between $1::date and $2::date order by day`,
    [r.from, r.to],
  );
  return rows.map((x) => x.day);
}

export interface FailedDay {
  day: string;
  attempts: number;
  lastError: string | null;
  finishedAt: string | null;
}

/** Days whose load stopped retrying; `attempts`: that load's (Temporal's attempt count). */
export async function failedDays(q: Queryable, limit = TOP_N): Promise<FailedDay[]> {
  return rowsOf<FailedDay>(
    q,
    `select day::text as day, attempt as attempts, last_error as "lastError", to_json(finished_at)#>>'{}' as "finishedAt"
       from sync_days where status = 'failed' order by day desc limit $1`,
    [limit],
  );
}

export interface RetryingLedgerDay {
  day: string;
  attempt: number;
  maxAttempts: number | null;
  lastError: string | null;
  errorCode: string | null;
  /** When the next attempt runs; null while one runs. */
  nextAttemptAt: string | null;
}

/** Days running whose load failed an attempt that Temporal retries (not failed days). */
export async function retryingDays(q: Queryable, limit = TOP_N): Promise<RetryingLedgerDay[]> {
  return rowsOf<RetryingLedgerDay>(
    q,
    `select day::text as day, attempt, max_attempts as "maxAttempts", last_error as "lastError",
            last_error_code as "errorCode", to_json(next_attempt_at)#>>'{}' as "nextAttemptAt"
       from sync_days where status = 'running' and last_error is not null order by day limit $1`,
    [limit],
  );
}

export interface HeldDeleteDay {
  day: string;
  rows: number;
  heldAt: string;
  reason: string | null;
}

/** Days whose soft-deletes the delete guard holds for review (`crs-sync deletes`). */
export async function heldDeletes(q: Queryable): Promise<HeldDeleteDay[]> {
  return rowsOf<HeldDeleteDay>(
    q,
    `select h.day::text as day, h.rows, to_json(h.held_at)#>>'{}' as "heldAt", d.deletes_held_reason as reason
       from held_delete_days h left join sync_days d on d.day = h.day
      order by h.day desc`,
  );
}

export interface QuarantineCode {
  source: string;
  errorCode: string;
  open: number;
  replayed: number;
  /** Up to three of the latest open records (all records once none is open). */
  examples: { id: number; day: string | null; lineNo: number | null; detail: string; raw: string }[];
}

/**
 * The quarantine by source and error code, each with a few examples cut to 200 characters. The
 * counts come from the data schema's `quarantine_counts`; the examples are quarantined lines as
 * received, in the internal schema, which a reader role (`crs-sync grant-reader`) cannot read:
 * it gets the counts and no examples.
 */
export async function quarantine(q: Queryable): Promise<QuarantineCode[]> {
  const [seen] = await rowsOf<{ lines: boolean }>(
    q,
    `select coalesce(has_table_privilege(to_regclass('rejected_records'), 'select'), false) as lines`,
  );
  const examples = seen?.lines
    ? `coalesce((select json_agg(json_build_object('id', e.id, 'day', e.day::text, 'lineNo', e.line_no,
                                                  'detail', left(e.error_detail, 200), 'raw', left(e.raw, 200))
                                order by e.id desc)
                  from (select * from rejected_records r
                         where r.source = g.source and r.error_code = g.error_code
                         order by (r.replayed_at is null) desc, r.id desc limit 3) e), '[]')`
    : `'[]'::json`;
  return rowsOf<QuarantineCode>(
    q,
    `with g as (
       select source, error_code, sum(open)::bigint as open, sum(replayed)::bigint as replayed
         from quarantine_counts group by source, error_code)
     select g.source, g.error_code as "errorCode", g.open, g.replayed, ${examples} as examples
       from g order by g.open desc, g.source, g.error_code`,
  );
}

export interface EnrichmentBacklog {
  byStatus: { status: string; threads: number }[];
  oldestPendingSince: string | null;
  failed: { threadId: string; attempts: number; lastError: string | null }[];
}

export async function enrichmentBacklog(q: Queryable, limit = TOP_N): Promise<EnrichmentBacklog> {
  // One pass over `threads` for the counts and the oldest pending request (a million threads
  // take ~0.1 s a scan); the failed threads' list costs a second one only when there are some.
  const byStatus = await rowsOf<{ status: string; threads: number; oldest: string | null }>(
    q,
    `select enrich_status as status, count(*) as threads,
            to_json(min(enrich_requested_at) filter (where enrich_status = 'pending'))#>>'{}' as oldest
       from threads group by 1 order by 2 desc, 1`,
  );
  const failed = byStatus.some((x) => x.status === 'failed')
    ? await rowsOf<{ threadId: string; attempts: number; lastError: string | null }>(
        q,
        `select thread_id::text as "threadId", enrich_attempts as attempts, last_error as "lastError"
           from threads where enrich_status = 'failed' order by enriched_at desc nulls last, thread_id limit $1`,
        [limit],
      )
    : [];
  return {
    byStatus: byStatus.map(({ status, threads }) => ({ status, threads })),
    oldestPendingSince: byStatus.find((x) => x.status === 'pending')?.oldest ?? null,
    failed,
  };
}
