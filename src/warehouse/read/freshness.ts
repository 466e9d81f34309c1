import { sql } from 'kysely';
import { getWatermark } from '../ledger.ts';
import type { Executor } from '../types.ts';

/**
 * How current the warehouse is, per source, judged against an SLA (CRS_FRESHNESS_SLA).
 *
 * - export: its age runs from the end (midnight UTC) of the watermark's day, the newest day known
 *   complete with every day before it. `failing` while a day after the watermark is `failed` (its
 *   load stopped retrying: the watermark cannot move until it loads); `no_data` while no day is
 *   complete and the deployment's first alert check is less than the SLA ago (a new deployment
 *   is given one SLA for its first day; before any check: `no_data` too), `no_data_until` saying
 *   until when; `late` when the age passes the SLA, or no day is complete past that; `on_time`
 *   otherwise. A partial day (the open day, pulled
 *   intraday) is not complete: neither the state nor the age counts it. What intraday pulls give
 *   is beside them, as `open_day`: the newest day pulled intraday and not complete since, when its
 *   last pull finished and how long ago (null when there is none).
 * - enrichment: its age is the oldest pending thread's (since it was queued), 0 with none
 *   pending. `failing` while a thread's enrichment is `failed` (out of retries; a replay or the
 *   next load of the thread re-queues it); `late` when the age passes the SLA.
 *
 * The `sync_health` view computes the same with `now()` and the deployment's stored SLA and first
 * check (src/warehouse/alert-settings.ts; migrations/2026-11-28T11-00-00_alerts_settings_no_data.ts):
 * change both together.
 */
export type FreshnessState = 'on_time' | 'late' | 'failing' | 'no_data';
export type FreshnessSource = 'export' | 'enrichment';

export interface SourceFreshness {
  state: FreshnessState;
  /** Seconds; null for the export while no day is complete. */
  age_seconds: number | null;
}

/** The open day as intraday pulls left it: its rows are the export as of `pulled_at`. */
export interface OpenDayPull {
  day: string;
  /** When the day's last intraday pull finished (ISO); null when none has yet (its pulls failed). */
  pulled_at: string | null;
  /** Whole seconds since then; with no pull finished, since the day began. */
  age_seconds: number;
  /** Present when the day's last pull failed: its error (the day keeps the rows of the pull before). */
  last_error?: string;
}

export interface ExportFreshness extends SourceFreshness {
  /** The open day's last intraday pull; null with no day pulled intraday and not complete since. */
  open_day: OpenDayPull | null;
  /** When `no_data` turns `late` (ISO): one SLA after the first check; null in any other state. */
  no_data_until: string | null;
}

export interface Freshness {
  sla_seconds: number;
  export: ExportFreshness;
  enrichment: SourceFreshness;
}

/** The default SLA: the daily schedule (00:30 UTC) plus its load time and a margin. */
export const DEFAULT_FRESHNESS_SLA_SECONDS = 26 * 3600;

const judge = (failing: boolean, age: number | null, sla: number): FreshnessState =>
  failing ? 'failing' : age === null || age > sla ? 'late' : 'on_time';

/** The export's state: as `judge`, but no complete day within one SLA of the first check is `no_data`. */
function judgeExport(
  failing: boolean,
  age: number | null,
  sla: number,
  startedAt: Date | null,
  now: Date,
): { state: FreshnessState; noDataUntil: string | null } {
  if (failing || age !== null) return { state: judge(failing, age, sla), noDataUntil: null };
  if (startedAt === null) return { state: 'no_data', noDataUntil: null };
  const until = new Date(startedAt.getTime() + sla * 1000);
  return now < until
    ? { state: 'no_data', noDataUntil: until.toISOString() }
    : { state: 'late', noDataUntil: null };
}

/** Freshness of the export and the enrichment now (for metrics: `age_seconds` and `state` per source). */
export async function readFreshness(
  db: Executor,
  slaSeconds = DEFAULT_FRESHNESS_SLA_SECONDS,
  now = new Date(),
): Promise<Freshness> {
  const watermark = await getWatermark(db);
  const r = await sql<{
    export_failing: boolean;
    enrich_age: number | null;
    enrich_failing: boolean;
    started_at: Date | null;
  }>`
    select (select started_at from alerting_since) as started_at,
           exists (select 1 from sync_days
                   where status = 'failed' and (${watermark}::date is null or day > ${watermark}::date))
             as export_failing,
           (select extract(epoch from ${now}::timestamptz - min(coalesce(enrich_requested_at, _loaded_at)))::float8
              from threads where enrich_status = 'pending') as enrich_age,
           exists (select 1 from threads where enrich_status = 'failed') as enrich_failing`.execute(db);
  const row = r.rows[0];
  const exportAge =
    watermark === null
      ? null
      : Math.floor((now.getTime() - Date.parse(`${watermark}T00:00:00Z`)) / 1000) - 86_400;
  const enrichAge = Math.max(0, Math.floor(Number(row?.enrich_age ?? 0)));
  const exp = judgeExport(row?.export_failing ?? false, exportAge, slaSeconds, row?.started_at ?? null, now);
  return {
    sla_seconds: slaSeconds,
    export: {
      state: exp.state,
      age_seconds: exportAge,
      open_day: await readOpenDayPull(db, now),
      no_data_until: exp.noDataUntil,
    },
    enrichment: { state: judge(row?.enrich_failing ?? false, enrichAge, slaSeconds), age_seconds: enrichAge },
  };
}

/**
 * The newest day pulled intraday and not complete since (`sync_days.pulled_at`: a day stays
 * the open day while its next pull runs, and after a pull that failed, with the time of the last
 * one that finished), or a `partial` day none of whose pulls finished yet (its age then runs from
 * the start of the day), or null. The metrics' open-day gauge and the `open_day_stale` alert read
 * it too; the `sync_health` view says the same (migration 2026-11-28T10-00-00).
 */
export async function readOpenDayPull(db: Executor, now = new Date()): Promise<OpenDayPull | null> {
  const r = await db
    .selectFrom('sync_days')
    .select(['day', 'pulled_at', 'last_error'])
    .where((eb) => eb.or([eb('pulled_at', 'is not', null), eb('status', '=', 'partial')]))
    .where('status', '<>', 'complete')
    .orderBy('day', 'desc')
    .limit(1)
    .executeTakeFirst();
  if (!r) return null;
  const pulledAt = r.pulled_at ? new Date(r.pulled_at) : null;
  const since = pulledAt ?? new Date(`${r.day}T00:00:00Z`);
  return {
    day: r.day,
    pulled_at: pulledAt ? pulledAt.toISOString() : null,
    age_seconds: Math.max(0, Math.floor((now.getTime() - since.getTime()) / 1000)),
    ...(r.last_error ? { last_error: r.last_error } : {}),
  };
}

/** What runs a query on pg's interface (the dashboard's pool or client). */
export interface RowQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** Freshness as the `sync_health` view shows it (the dashboard's health page). */
export async function healthViewFreshness(q: RowQueryable): Promise<Freshness> {
  const { rows } = await q.query(
    `select freshness_sla_seconds::int as sla, export_age_seconds::float8 as export_age, export_freshness,
            enrichment_age_seconds::float8 as enrichment_age, enrichment_freshness,
            open_day::text as open_day, open_day_pulled_at, open_day_age_seconds::float8 as open_day_age,
            export_no_data_until,
            open_day_last_error
       from sync_health`,
  );
  const h = rows[0] as
    | {
        sla: number;
        export_age: number | null;
        export_freshness: FreshnessState;
        enrichment_age: number;
        enrichment_freshness: FreshnessState;
        open_day: string | null;
        open_day_pulled_at: Date | string | null;
        open_day_age: number | null;
        export_no_data_until: Date | string | null;
        open_day_last_error: string | null;
      }
    | undefined;
  if (!h) throw new Error('the sync_health view returned no row');
  return {
    sla_seconds: h.sla,
    export: {
      state: h.export_freshness,
      age_seconds: h.export_age,
      open_day:
        h.open_day === null
          ? null
          : {
              day: h.open_day,
              pulled_at: h.open_day_pulled_at === null ? null : new Date(h.open_day_pulled_at).toISOString(),
              age_seconds: Number(h.open_day_age),
              ...(h.open_day_last_error ? { last_error: h.open_day_last_error } : {}),
            },
      no_data_until: h.export_no_data_until === null ? null : new Date(h.export_no_data_until).toISOString(),
    },
    enrichment: { state: h.enrichment_freshness, age_seconds: h.enrichment_age },
  };
}

/**
 * One line: `export on_time (age 5h 2m), enrichment late (age 27h 0m); SLA 26h`, and with an
 * intraday pull `; open day 2026-11-26 pulled intraday 0h 12m ago` (`, its last pull failed`
 * when it did; `no intraday pull finished yet` when none has). A new deployment:
 * `export no_data (no complete day yet; late from 2026-11-29 11:00 UTC if none is)`.
 */
export function describeFreshness(f: Freshness): string {
  const hm = (s: number) => `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  const age = (s: number | null) => (s === null ? 'no complete day yet' : `age ${hm(s)}`);
  const one = (name: string, x: SourceFreshness) => `${name} ${x.state} (${age(x.age_seconds)})`;
  const open = f.export.open_day;
  const until = f.export.no_data_until;
  const exp = until
    ? `${one('export', f.export).slice(0, -1)}; late from ${until.slice(0, 16).replace('T', ' ')} UTC if none is)`
    : one('export', f.export);
  return (
    `${exp}, ${one('enrichment', f.enrichment)}; SLA ${Math.round(f.sla_seconds / 360) / 10}h` +
    (open
      ? `; open day ${open.day} ${open.pulled_at ? `pulled intraday ${hm(open.age_seconds)} ago` : `no intraday pull finished yet (${hm(open.age_seconds)} since it began)`}${open.last_error ? ', its last pull failed' : ''}`
      : '')
  );
}
