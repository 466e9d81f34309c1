import { sql } from 'kysely';
import { dayCount, shiftDay, utcDay } from '../../common/civil-date.ts';
import { deploymentFreshnessSla } from '../alert-settings.ts';
import { type HeldDay, listHeldDeletes } from '../held-deletes.ts';
import { getWatermark } from '../ledger.ts';
import { BUDGET_HOLD_MS } from '../rate-budget.ts';
import type { Executor } from '../types.ts';
import { DEFAULT_FRESHNESS_SLA_SECONDS, type Freshness, readFreshness } from './freshness.ts';
import { queryable } from './queryable.ts';
import { type RecentRun, recentRuns } from './runs.ts';
import { openSchemaDrift, type SchemaDrift } from './schema-drift.ts';
import { readThreadListReads, type ThreadListReads } from './thread-list.ts';

/** What `crs-sync status` shows: the state of the ledger, the runs, the quarantine and enrichment. */
export interface WarehouseStatus {
  watermark: string | null;
  /** Whole days between the watermark and yesterday (UTC); null with no watermark. */
  lagDays: number | null;
  /**
   * Days by status; `abandoned`: marked running, with no sign of life for staleAfterMinutes;
   * `retrying`: marked running, with a failed attempt of their load behind them (retryingDays).
   */
  days: Record<string, number>;
  /**
   * Days whose load stopped retrying: `attempts` of that load (Temporal's attempt count), the
   * error that ended it and its code.
   */
  failedDays: {
    day: string;
    attempts: number;
    lastError: string | null;
    errorCode: string | null;
    failedAt: string | null;
  }[];
  /**
   * Days marked running whose load failed an attempt and is retried by Temporal: the attempt
   * (the one that failed, or the retry running now), its limit, the last error and its code,
   * when it happened and when the next attempt runs (null while one runs).
   */
  retryingDays: RetryingDay[];
  /** Days marked running whose load is gone (terminated, its worker lost): the next load takes them over. */
  abandonedDays: { day: string; loadId: string | null; attempts: number; lastSignOfLife: string | null }[];
  /** How long a running run or day may show no sign of life before it is shown as abandoned. */
  staleAfterMinutes: number;
  /** As read/runs.ts reads them, the window as one text ('from..to'). */
  recentRuns: (Omit<RecentRun, 'windowStart' | 'windowEnd'> & { window: string | null })[];
  /** By source and code: open, replayed, and closed otherwise (dismissed by hand, or gone from a complete load of their day). */
  rejects: { source: string; errorCode: string; open: number; replayed: number; closed: number }[];
  threads: Record<string, number>;
  /** How the enrichment's reads of the thread list went: names and re-queues depend on them. */
  threadList: ThreadListReads;
  messages: { live: number; deleted: number };
  /** Days whose deletes the guard held for review (`crs-sync deletes`). */
  heldDeletes: HeldDay[];
  /**
   * Days pulled while open (intraday pulls): loaded up to their last pull, nothing deleted, not
   * complete, so the watermark does not count them; the closed-day pull makes them complete.
   */
  partialDays: {
    day: string;
    /** When its last pull finished; null when none has (its pulls failed). */
    lastPullAt: string | null;
    rows: number;
    /** Present when its last pull failed: what failed (the rows are the pull's before). */
    lastError?: string;
    errorCode?: string | null;
    attempt?: number;
    /** When the failed pull's next attempt runs; null when it stopped retrying. */
    nextAttemptAt?: string | null;
  }[];
  /** Days whose last export was not known complete (nothing of them deleted), and why; partial days are not listed. */
  incompleteExports: { day: string; reason: string | null; loadId: string | null }[];
  /** The export's and the enrichment's state and age against the SLA (freshness.ts). */
  freshness: Freshness;
  /** Schema drift not accepted yet (`crs-sync schema changes`, `crs-sync schema accept`). */
  schemaDrift: SchemaDrift[];
  /** The shared request budgets (`rate_budget`, CRS_SHARED_BUDGET_NAME): the limit in force and its use now. */
  budgets: RequestBudget[];
}

/** One shared request budget as it stands (migrations/…_rate_budget.ts, docs/operations.md). */
export interface RequestBudget {
  name: string;
  /**
   * The limit in force (the lowest asked for within 10 minutes, or the fixed one) as the
   * requests per second a worker asked for (CRS_RATE_LIMIT_RPS, CRS_RATE_BUDGET_RPS): the stored
   * window less the workers' hold (BUDGET_HOLD_MS). Null before a lease.
   */
  limitPerSecond: number | null;
  /** Requests leased within the window that ends now. */
  leasedInWindow: number;
  windowMs: number | null;
  /** How much longer a Retry-After holds every request (0: not paused). */
  pausedSeconds: number;
  /** The last lease (or pause). */
  updatedAt: string;
}

export interface RetryingDay {
  day: string;
  loadId: string | null;
  attempt: number;
  maxAttempts: number | null;
  lastError: string | null;
  errorCode: string | null;
  failedAt: string | null;
  nextAttemptAt: string | null;
}

const iso = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString());

/** Reads every section of the status, in the order `crs-sync status` shows them. */
export async function readStatus(
  db: Executor,
  now = new Date(),
  freshnessSlaSeconds = DEFAULT_FRESHNESS_SLA_SECONDS,
): Promise<WarehouseStatus> {
  const watermark = await getWatermark(db);
  const yesterday = shiftDay(utcDay(now), -1);
  const lagDays = watermark === null ? null : Math.max(0, dayCount(watermark, yesterday) - 1);
  const days = await readDays(db);
  const recentRuns = await readRecentRuns(db);
  const threads = await db
    .selectFrom('threads')
    .select(['enrich_status', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy('enrich_status')
    .execute();
  const msgs = await db
    .selectFrom('analytics_messages')
    .select([
      sql<number>`count(*) filter (where _deleted_at is null)`.as('live'),
      sql<number>`count(*) filter (where _deleted_at is not null)`.as('deleted'),
    ])
    .executeTakeFirstOrThrow();
  const heldDeletes = await listHeldDeletes(db);
  const incomplete = await db
    .selectFrom('sync_days')
    .select(['day', 'export_incomplete_reason', '_load_id'])
    .where('export_complete', '=', false)
    .where('status', '<>', 'partial')
    .orderBy('day', 'desc')
    .limit(20)
    .execute();
  return {
    watermark,
    lagDays,
    ...days,
    staleAfterMinutes: await abandonedAfterMinutes(db),
    recentRuns,
    rejects: await readRejectCounts(db),
    threads: Object.fromEntries(threads.map((t) => [t.enrich_status, Number(t.n)])),
    threadList: await readThreadListReads(queryable(db)),
    messages: { live: Number(msgs.live), deleted: Number(msgs.deleted) },
    heldDeletes,
    partialDays: await readPartialDays(db),
    incompleteExports: incomplete.map((d) => ({
      day: d.day,
      reason: d.export_incomplete_reason,
      loadId: d._load_id,
    })),
    // The deployment's stored SLA, the one the alerts judge by; `freshnessSlaSeconds` before any check.
    freshness: await readFreshness(db, await deploymentFreshnessSla(db, freshnessSlaSeconds), now),
    schemaDrift: await openSchemaDrift(queryable(db)),
    budgets: await readBudgets(db),
  };
}

/** The partial days (the open day, pulled intraday), newest first, with their last pull's error. */
async function readPartialDays(db: Executor): Promise<WarehouseStatus['partialDays']> {
  const partial = await db
    .selectFrom('sync_days')
    .select(['day', 'pulled_at', 'rows_read', 'last_error', 'last_error_code', 'attempt', 'next_attempt_at'])
    .where('status', '=', 'partial')
    .orderBy('day', 'desc')
    .limit(20)
    .execute();
  return partial.map((d) => ({
    day: d.day,
    lastPullAt: iso(d.pulled_at),
    rows: Number(d.rows_read),
    ...(d.last_error
      ? {
          lastError: d.last_error,
          errorCode: d.last_error_code,
          attempt: d.attempt,
          nextAttemptAt: iso(d.next_attempt_at),
        }
      : {}),
  }));
}

/** The quarantine by source and code: open, replayed, and closed otherwise (dismissed, gone). */
async function readRejectCounts(db: Executor): Promise<WarehouseStatus['rejects']> {
  const rejects = await db
    .selectFrom('rejected_records')
    .select([
      'source',
      'error_code',
      sql<number>`count(*) filter (where replayed_at is null)`.as('open'),
      sql<number>`count(*) filter (where replayed_at is not null and coalesce(resolution, 'replayed') = 'replayed')`.as(
        'replayed',
      ),
      sql<number>`count(*) filter (where resolution in ('dismissed', 'gone'))`.as('closed'),
    ])
    .groupBy(['source', 'error_code'])
    .orderBy('source')
    .orderBy('error_code')
    .execute();
  return rejects.map((r) => ({
    source: r.source,
    errorCode: r.error_code,
    open: Number(r.open),
    replayed: Number(r.replayed),
    closed: Number(r.closed),
  }));
}

/** The shared request budgets: one row each, their leases within the window counted here. */
export async function readBudgets(db: Executor): Promise<RequestBudget[]> {
  const r = await sql<{
    name: string;
    limit_per_window: number | null;
    window_ms: number | null;
    leased: number;
    paused_s: number;
    updated_at: Date;
  }>`
    select b.name, b.limit_per_window, b.window_ms,
           (select coalesce(sum(l.n), 0) from unnest(b.lease_at, b.lease_n) as l(at, n)
             where b.window_ms is not null and l.at > clock_timestamp() - b.window_ms * interval '1 millisecond')::int as leased,
           greatest(0, extract(epoch from b.paused_until - clock_timestamp()))::float8 as paused_s,
           b.updated_at
      from rate_budget b
     order by b.name`.execute(db);
  return r.rows.map((b) => ({
    name: b.name,
    limitPerSecond:
      b.limit_per_window === null || !b.window_ms ? null : perSecond(b.limit_per_window, b.window_ms),
    leasedInWindow: Number(b.leased),
    windowMs: b.window_ms,
    pausedSeconds: Math.ceil(Number(b.paused_s ?? 0)),
    updatedAt: b.updated_at.toISOString(),
  }));
}

/**
 * A stored limit per window as requests per second. Workers store the tenant's window plus their
 * hold (20/s as 20 per 1,075 ms), so the hold comes off first: 20, not 18.6. A window no longer
 * than the hold (not a worker's) is taken as it is.
 */
export function perSecond(limitPerWindow: number, windowMs: number): number {
  const window = windowMs > BUDGET_HOLD_MS ? windowMs - BUDGET_HOLD_MS : windowMs;
  return Math.round((limitPerWindow * 1000 * 100) / window) / 100;
}

/**
 * The threshold after which a silent running run or day is abandoned: the warehouse's own
 * (`abandoned_after()`, which the liveness views apply), so what status says is what they count.
 */
export async function abandonedAfterMinutes(db: Executor): Promise<number> {
  const r = await sql<{ minutes: number }>`
    select extract(epoch from abandoned_after())::float8 / 60 as minutes`.execute(db);
  return Number(r.rows[0]?.minutes);
}

/**
 * Days by status (running ones with no sign of life counted as abandoned, those retrying after a
 * failed attempt as retrying), failed, retrying and abandoned days.
 */
async function readDays(
  db: Executor,
): Promise<Pick<WarehouseStatus, 'days' | 'failedDays' | 'retryingDays' | 'abandonedDays'>> {
  const days = await db
    .selectFrom('sync_days')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('status', '<>', 'running')
    .groupBy('status')
    .execute();
  const running = await db
    .selectFrom('sync_days as d')
    .innerJoin('day_liveness as l', 'l.day', 'd.day')
    .select([
      'd.day',
      'd._load_id',
      'd.attempts',
      'd.attempt',
      'd.max_attempts',
      'd.last_error',
      'd.last_error_code',
      'd.last_error_at',
      'd.next_attempt_at',
      'l.alive_at',
      'l.abandoned',
    ])
    .where('d.status', '=', 'running')
    .orderBy('d.day')
    .execute();
  const abandonedDays = running.filter((d) => d.abandoned);
  const retrying = running.filter((d) => !d.abandoned && d.last_error !== null);
  const dayCounts: Record<string, number> = Object.fromEntries(days.map((d) => [d.status, Number(d.n)]));
  const live = running.length - abandonedDays.length - retrying.length;
  if (live > 0) dayCounts.running = live;
  if (retrying.length > 0) dayCounts.retrying = retrying.length;
  if (abandonedDays.length > 0) dayCounts.abandoned = abandonedDays.length;
  const failed = await db
    .selectFrom('sync_days')
    .select(['day', 'attempt', 'last_error', 'last_error_code', 'finished_at'])
    .where('status', '=', 'failed')
    .orderBy('day')
    .limit(20)
    .execute();
  return {
    days: dayCounts,
    failedDays: failed.map((f) => ({
      day: f.day,
      attempts: f.attempt,
      lastError: f.last_error,
      errorCode: f.last_error_code,
      failedAt: iso(f.finished_at),
    })),
    retryingDays: retrying.slice(0, 20).map((d) => ({
      day: d.day,
      loadId: d._load_id,
      attempt: d.attempt,
      maxAttempts: d.max_attempts,
      lastError: d.last_error,
      errorCode: d.last_error_code,
      failedAt: iso(d.last_error_at),
      nextAttemptAt: iso(d.next_attempt_at),
    })),
    abandonedDays: abandonedDays.slice(0, 20).map((d) => ({
      day: d.day,
      loadId: d._load_id,
      attempts: d.attempts,
      lastSignOfLife: d.alive_at ? new Date(d.alive_at).toISOString() : null,
    })),
  };
}

/** The last ten runs (read/runs.ts, the dashboard's too), the window as one text. */
async function readRecentRuns(db: Executor): Promise<WarehouseStatus['recentRuns']> {
  const runs = await recentRuns(queryable(db), { limit: 10 });
  return runs.map(({ windowStart, windowEnd, ...r }) => ({
    loadId: r.loadId,
    kind: r.kind,
    status: r.status,
    window: windowStart ? `${windowStart}..${windowEnd}` : null,
    rowsRead: r.rowsRead,
    inserted: r.inserted,
    updated: r.updated,
    rejected: r.rejected,
    suppressed: r.suppressed,
    deleted: r.deleted,
    startedAt: r.startedAt,
    finishedAt: r.finishedAt,
    lastSignOfLife: r.lastSignOfLife,
    error: r.error,
  }));
}
