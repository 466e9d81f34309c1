import { ALERT_KINDS, ALERT_SEVERITY, type AlertKind } from '../common/alert-kinds.ts';
import { redactText } from '../log.ts';
import type { JudgedSettings } from '../warehouse/alert-settings.ts';
import type { Condition } from '../warehouse/incidents.ts';
import {
  type Freshness,
  queryable,
  readFailedDays,
  readFailedDaysSince,
  readFreshness,
  readHeldDeleteDays,
  readQuarantineSpikes,
  readStarvedBudgets,
  readThreadListReads,
} from '../warehouse/read/index.ts';
import type { Executor } from '../warehouse/types.ts';
import { type OpenDrift, openSchemaDrifts } from './drift-source.ts';

/**
 * What the checks judge by: the deployment's stored settings (src/warehouse/alert-settings.ts),
 * never one worker's own, so that workers configured apart decide the same incidents.
 */
export type CheckSettings = JudgedSettings & {
  /** CRS_OPEN_DAY_STALE_AFTER: the open day with no intraday pull finished for longer is stale (default 3 h). */
  openDayStaleAfterSeconds?: number;
};

export { ALERT_KINDS, type AlertKind };

/** CRS_OPEN_DAY_STALE_AFTER's default: three missed pulls of an hourly intraday schedule. */
export const DEFAULT_OPEN_DAY_STALE_AFTER_SECONDS = 3 * 3600;

const hours = (s: number) => `${Math.round(s / 360) / 10} h`;

/**
 * What resolved an open incident whose condition is gone, by its key: merged into the incident's
 * details (`resolution`, the text its RESOLVED message says instead of the failure's).
 */
export type Resolutions = Record<string, { resolution: string } & Record<string, unknown>>;

/** The conditions true now, with the freshness they were judged from, and what resolved the others. */
export async function evaluateConditions(
  db: Executor,
  s: CheckSettings,
  now = new Date(),
): Promise<{ conditions: Condition[]; freshness: Freshness; resolutions: Resolutions }> {
  const freshness = await readFreshness(db, s.freshnessSlaSeconds, now);
  const conditions = [
    ...(await failedDays(db)),
    ...openDayStale(freshness, s.openDayStaleAfterSeconds ?? DEFAULT_OPEN_DAY_STALE_AFTER_SECONDS),
    ...exportLate(freshness),
    ...(await heldDeletes(db)),
    ...(await quarantineSpikes(db, s.quarantineShare)),
    ...(await schemaDrifts(db)),
    ...enrichmentStalled(freshness),
    ...(await threadListFailing(db)),
    ...(await budgetStarved(db, s.budgetWaitMs)),
  ];
  return { conditions, freshness, resolutions: await dayResolutions(db) };
}

const utc = (d: Date) => `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
const attemptsText = (n: number) => `${n} attempt${n === 1 ? '' : 's'}`;

/**
 * A day whose load stopped retrying (`failed` in the ledger: its attempts ran out, or an error no
 * retry can fix) until it loads. Its attempts are those of that load, as Temporal counted them.
 */
async function failedDays(db: Executor): Promise<Condition[]> {
  const rows = await readFailedDays(db);
  return rows.map((d) => {
    const error = redactText((d.last_error ?? '').slice(0, 200));
    const code = d.last_error_code;
    return {
      key: `day_failed:${d.day}`,
      kind: 'day_failed',
      severity: 'critical',
      summary: `day ${d.day} failed: its load gave up after ${attemptsText(d.attempt)}${code ? ` (${code})` : ''}${error ? `; last error: ${error}` : ''}`,
      details: { day: d.day, attempts: d.attempt, max_attempts: d.max_attempts, code, error },
    };
  });
}

/**
 * What ended each open `day_failed` incident whose day is no longer failed: the day as the
 * ledger has it now (loaded, pulled, loading again, cancelled), for its RESOLVED message.
 */
async function dayResolutions(db: Executor): Promise<Resolutions> {
  const out: Resolutions = {};
  for (const d of await readFailedDaysSince(db)) {
    const n = Number(d.attempt ?? 0);
    const at = d.finished_at ? utc(new Date(d.finished_at)) : 'an unknown time';
    const resolution =
      d.status === 'complete'
        ? `day ${d.day} loaded complete at ${at} after ${attemptsText(n)}`
        : d.status === 'partial'
          ? `day ${d.day} pulled (partial, the open day) at ${at} after ${attemptsText(n)}`
          : d.status === 'running'
            ? `day ${d.day} is loading again (attempt ${n}, started ${d.started_at ? utc(new Date(d.started_at)) : 'just now'})`
            : d.status === 'pending' && d.code === 'CANCELLED'
              ? `day ${d.day} is pending again: its load was cancelled at ${at}`
              : d.status === 'pending'
                ? `day ${d.day} loaded at ${at} after ${attemptsText(n)}, its export not known complete (the next sync loads it again)`
                : `day ${d.day} is no longer in the ledger`;
    out[d.key] = { resolution, resolved_by: { status: d.status, attempts: n } };
  }
  return out;
}

/**
 * The open day (pulled intraday, not complete since) with no pull finished for longer than the
 * limit: its rows are that old. One failed pull is not this (the next one may succeed); the day
 * stays `partial` with the pull's error, which the message repeats.
 */
function openDayStale(f: Freshness, limitSeconds: number): Condition[] {
  const o = f.export.open_day;
  if (!o || o.age_seconds <= limitSeconds) return [];
  const since = o.pulled_at
    ? `was last pulled ${hours(o.age_seconds)} ago`
    : `has had no pull finish since it began ${hours(o.age_seconds)} ago`;
  const error = o.last_error ? redactText(o.last_error.slice(0, 200)) : null;
  return [
    {
      key: 'open_day_stale',
      kind: 'open_day_stale',
      severity: ALERT_SEVERITY.open_day_stale,
      summary: `the open day ${o.day} ${since} (CRS_OPEN_DAY_STALE_AFTER ${hours(limitSeconds)})${error ? `; last error: ${error}` : ''}`,
      details: {
        day: o.day,
        pulled_at: o.pulled_at,
        age_seconds: o.age_seconds,
        stale_after_seconds: limitSeconds,
        error,
      },
    },
  ];
}

/**
 * The export `late`: its age past the SLA, or no complete day one SLA after the deployment's first
 * check (before that it is `no_data`: a new deployment is not paged before its first day). A
 * `failing` export is the `day_failed` alert's: one failure, one page.
 */
function exportLate(f: Freshness): Condition[] {
  const age = f.export.age_seconds;
  if (f.export.state !== 'late') return [];
  return [
    {
      key: 'freshness_late:export',
      kind: 'freshness_late',
      severity: ALERT_SEVERITY.freshness_late,
      summary:
        age === null
          ? `no day of the export is loaded complete yet, ${hours(f.sla_seconds)} (the SLA) after the first check`
          : `the newest complete day ended ${hours(age)} ago, past the SLA of ${hours(f.sla_seconds)}`,
      details: { source: 'export', age_seconds: age, sla_seconds: f.sla_seconds, state: f.export.state },
    },
  ];
}

/** A day whose deletes the guard held for review. */
async function heldDeletes(db: Executor): Promise<Condition[]> {
  const rows = await readHeldDeleteDays(db);
  return rows.map((d) => ({
    key: `deletes_held:${d.day}`,
    kind: 'deletes_held',
    severity: ALERT_SEVERITY.deletes_held,
    summary: `${Number(d.n)} delete(s) of day ${d.day} held for review (CRS_DELETE_GUARD)`,
    details: { day: d.day, held: Number(d.n) },
  }));
}

/** A day whose last load rejected more than `share` of the rows it read. */
async function quarantineSpikes(db: Executor, share: number): Promise<Condition[]> {
  const rows = await readQuarantineSpikes(db, share);
  return rows.map((d) => {
    const pct = Math.round((d.rows_rejected / d.rows_read) * 1000) / 10;
    return {
      key: `quarantine_spike:${d.day}`,
      kind: 'quarantine_spike',
      severity: ALERT_SEVERITY.quarantine_spike,
      summary: `day ${d.day}: ${d.rows_rejected} of ${d.rows_read} lines quarantined (${pct} %, above ${share * 100} %)`,
      details: { day: d.day, rejected: d.rows_rejected, read: d.rows_read, share },
    };
  });
}

/** Paths a drift alert names, and how much of each. */
const DRIFT_PATHS_SHOWN = 5;
const DRIFT_PATH_CHARS = 80;

/**
 * One incident per source while any of its drifts is not accepted: a line with thousands of new
 * keys is one message, naming the first few (bounded in count and length) and how many more.
 */
async function schemaDrifts(db: Executor): Promise<Condition[]> {
  const bySource = new Map<string, OpenDrift[]>();
  for (const d of await openSchemaDrifts(db)) {
    const list = bySource.get(d.source);
    if (list) list.push(d);
    else bySource.set(d.source, [d]);
  }
  return [...bySource.entries()].map(([source, drifts]) => {
    const cut = (p: string) => (p.length > DRIFT_PATH_CHARS ? `${p.slice(0, DRIFT_PATH_CHARS)}…` : p);
    const shown = drifts.slice(0, DRIFT_PATHS_SHOWN);
    const more = drifts.length - shown.length;
    return {
      key: `schema_drift:${source}`,
      kind: 'schema_drift',
      severity: ALERT_SEVERITY.schema_drift,
      summary:
        `${source}: ${drifts.length} field(s) differ from the contract: ` +
        shown.map((d) => `${d.kind} ${cut(d.path)}`).join(', ') +
        (more > 0 ? ` and ${more} more` : ''),
      details: {
        source,
        drifts: drifts.length,
        first: shown.map((d) => ({ path: cut(d.path), kind: d.kind, first_day: d.firstDay, count: d.count })),
        more,
      },
    };
  });
}

/** The enrichment's oldest pending thread past the SLA, or threads out of retries. */
function enrichmentStalled(f: Freshness): Condition[] {
  const e = f.enrichment;
  if (e.state === 'on_time') return [];
  return [
    {
      key: 'enrichment_stalled',
      kind: 'enrichment_stalled',
      severity: ALERT_SEVERITY.enrichment_stalled,
      summary:
        e.state === 'failing'
          ? 'threads failed their enrichment after its retries'
          : `the oldest pending thread has waited ${hours(e.age_seconds ?? 0)}, past the SLA of ${hours(f.sla_seconds)}`,
      details: {
        source: 'enrichment',
        age_seconds: e.age_seconds,
        sla_seconds: f.sla_seconds,
        state: e.state,
      },
    },
  ];
}

/**
 * The thread list's last read failed (`thread_list_reads`): enrichment goes on, but thread names
 * stop updating and threads whose history grew are no longer queued again, which nothing else
 * would show. A stall of the enrichment under a key of its own; the next read that works ends it.
 */
async function threadListFailing(db: Executor): Promise<Condition[]> {
  const t = await readThreadListReads(queryable(db));
  if (!t.failing) return [];
  const error = redactText((t.lastError ?? '').slice(0, 200));
  return [
    {
      key: 'enrichment_stalled:thread_list',
      kind: 'enrichment_stalled',
      severity: 'warning',
      summary:
        `the thread list could not be read (${t.failures} failed read(s) since ${t.failingSince}): thread ` +
        `names are not updated and threads whose history grew are not queued again${error ? `: ${error}` : ''}`,
      details: {
        source: 'thread_list',
        failures: t.failures,
        failing_since: t.failingSince,
        last_ok_at: t.lastOkAt,
        error,
      },
    },
  ];
}

/**
 * The shared request budget paused (the service's Retry-After) for longer than the limit from now:
 * every request of the deployment waits at least that long. Measured from `rate_budget`, the one
 * place every worker's waits meet.
 */
async function budgetStarved(db: Executor, limitMs: number): Promise<Condition[]> {
  const rows = await readStarvedBudgets(db, limitMs);
  return rows.map((b) => ({
    key: `budget_starved:${b.name}`,
    kind: 'budget_starved',
    severity: ALERT_SEVERITY.budget_starved,
    summary: `the shared request budget "${b.name}" holds every request for ${Math.round(Number(b.wait_ms) / 1000)} s (limit ${Math.round(limitMs / 1000)} s)`,
    details: { budget: b.name, wait_ms: Math.round(Number(b.wait_ms)), limit_ms: limitMs },
  }));
}
