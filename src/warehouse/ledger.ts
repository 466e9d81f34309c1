// Subpath imports: the package root loads all of date-fns (about a second of CLI start-up).
import { addDays } from 'date-fns/addDays';
import { formatISO } from 'date-fns/formatISO';
import { parseISO } from 'date-fns/parseISO';
import { type Kysely, sql } from 'kysely';
import { STALE_AFTER_MS } from '../../workflows/liveness.ts';
import type { Database, RunKind, RunStatus } from './types.ts';

/**
 * The ledger: one row per run (`sync_runs`) and one per UTC day of the export (`sync_days`).
 * Repositories are plain functions over `db` (or a transaction).
 */

export function utcDay(d: Date): string {
  return d.toISOString().slice(0, 10);
}

export function dayRange(from: string, to: string): string[] {
  const out: string[] = [];
  for (let d = parseISO(from); formatISO(d, { representation: 'date' }) <= to; d = addDays(d, 1)) {
    out.push(formatISO(d, { representation: 'date' }));
  }
  return out;
}

export function shiftDay(day: string, n: number): string {
  return formatISO(addDays(parseISO(day), n), { representation: 'date' });
}

export interface StartRunInput {
  loadId: string;
  kind: RunKind;
  windowStart?: string | null;
  windowEnd?: string | null;
  source?: string | null;
  workflowId?: string | null;
}

/**
 * The last sign of life of a run or of a day's load: `progress_at` (its start, its activities'
 * heartbeats) or its load's last batch commit (a checkpoint row's `updated_at`; an import's load
 * key is its load id, an export day's the load id and the day). SQL over `sync_runs r` and
 * `sync_days d`.
 */
export const RUN_ALIVE_AT = sql<Date>`greatest(r.progress_at,
  (select max(c.updated_at) from load_checkpoints c where c.load_key = r.load_id))`;
export const DAY_ALIVE_AT = sql<Date>`greatest(d.progress_at,
  (select max(c.updated_at) from load_checkpoints c where c.load_key = d._load_id || ':' || to_char(d.day, 'YYYY-MM-DD')))`;

/** Whether a `running` run or day last showed a sign of life before `staleAfterMs` ago. */
export function isStale(aliveAt: Date | null, now: Date, staleAfterMs = STALE_AFTER_MS): boolean {
  return aliveAt === null || now.getTime() - aliveAt.getTime() > staleAfterMs;
}

/**
 * Records a run; starting the same load id again (a resumed import, a retried activity) keeps its
 * row. Other runs still marked running that have shown no sign of life for `staleAfterMs` are
 * marked abandoned (a terminated workflow, a killed import: nothing else would ever close them);
 * their ids are returned.
 */
export async function startRun(
  db: Kysely<Database>,
  r: StartRunInput,
  staleAfterMs = STALE_AFTER_MS,
): Promise<{ abandoned: string[] }> {
  await db
    .insertInto('sync_runs')
    .values({
      load_id: r.loadId,
      kind: r.kind,
      window_start: r.windowStart ?? null,
      window_end: r.windowEnd ?? null,
      source: r.source ?? null,
      workflow_id: r.workflowId ?? null,
      status: 'running',
    })
    .onConflict((oc) =>
      oc
        .column('load_id')
        .doUpdateSet({ status: 'running', finished_at: null, error: null, progress_at: sql`now()` }),
    )
    .execute();
  return { abandoned: await abandonStaleRuns(db, r.loadId, staleAfterMs) };
}

/** Marks runs abandoned that read `running` yet have shown no sign of life for `staleAfterMs`. */
export async function abandonStaleRuns(
  db: Kysely<Database>,
  byLoadId: string,
  staleAfterMs = STALE_AFTER_MS,
): Promise<string[]> {
  const res = await sql<{ load_id: string }>`
    update sync_runs r
    set status = 'abandoned', finished_at = now(),
        error = 'no sign of life since ' || to_char(${RUN_ALIVE_AT} at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS')
          || ' UTC (terminated, or its worker is gone); marked abandoned by run ' || ${byLoadId}::text
    where r.status = 'running' and r.load_id <> ${byLoadId}
      and ${RUN_ALIVE_AT} < now() - make_interval(secs => ${staleAfterMs / 1000})
    returning r.load_id`.execute(db);
  return res.rows.map((x) => x.load_id);
}

/**
 * A sign of life of a run, and of its load of `day`: what its activities call as they heartbeat.
 * A run marked abandoned that shows one is running after all (its workers were only away).
 */
export async function touchRun(db: Kysely<Database>, loadId: string, day?: string): Promise<void> {
  await db
    .updateTable('sync_runs')
    .set((eb) => ({
      progress_at: sql`now()`,
      status: eb
        .case()
        .when('status', '=', 'abandoned')
        .then(eb.val<RunStatus>('running'))
        .else(eb.ref('status'))
        .end(),
      finished_at: eb.case().when('status', '=', 'abandoned').then(null).else(eb.ref('finished_at')).end(),
      error: eb.case().when('status', '=', 'abandoned').then(null).else(eb.ref('error')).end(),
    }))
    .where('load_id', '=', loadId)
    .execute();
  if (day !== undefined) {
    await db
      .updateTable('sync_days')
      .set({ progress_at: sql`now()` })
      .where('day', '=', day)
      .where('_load_id', '=', loadId)
      .where('status', '=', 'running')
      .execute();
  }
}

export interface RunTotals {
  rowsRead: number;
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
  deleted: number;
  bytes: number;
}

export async function finishRun(
  db: Kysely<Database>,
  loadId: string,
  status: Exclude<RunStatus, 'running'>,
  totals?: Partial<RunTotals>,
  error?: string,
): Promise<void> {
  await db
    .updateTable('sync_runs')
    .set({
      status,
      finished_at: new Date(),
      error: error ?? null,
      ...(totals
        ? {
            rows_read: totals.rowsRead ?? 0,
            rows_inserted: totals.inserted ?? 0,
            rows_updated: totals.updated ?? 0,
            rows_unchanged: totals.unchanged ?? 0,
            rows_rejected: totals.rejected ?? 0,
            rows_deleted: totals.deleted ?? 0,
            bytes_read: totals.bytes ?? 0,
          }
        : {}),
    })
    .where('load_id', '=', loadId)
    .execute();
}

/** Adds a day's figures to its run (a run of many days sums them as they finish). */
export async function addToRun(db: Kysely<Database>, loadId: string, t: RunTotals): Promise<void> {
  await db
    .updateTable('sync_runs')
    .set((eb) => ({
      rows_read: eb('rows_read', '+', t.rowsRead),
      rows_inserted: eb('rows_inserted', '+', t.inserted),
      rows_updated: eb('rows_updated', '+', t.updated),
      rows_unchanged: eb('rows_unchanged', '+', t.unchanged),
      rows_rejected: eb('rows_rejected', '+', t.rejected),
      rows_deleted: eb('rows_deleted', '+', t.deleted),
      bytes_read: eb('bytes_read', '+', t.bytes),
    }))
    .where('load_id', '=', loadId)
    .execute();
}

/**
 * Marks a day as loading under a load id; counts one more attempt. A day still `running` under
 * another load id is taken over: only one load of a day runs at a time (its workflow id), so that
 * load died without closing the day (terminated, its worker gone). Its id is kept in
 * `taken_over_from` and returned.
 */
export async function markDayRunning(
  db: Kysely<Database>,
  day: string,
  loadId: string,
): Promise<{ takenOverFrom: string | null }> {
  const r = await db
    .insertInto('sync_days')
    .values({
      day,
      status: 'running',
      _load_id: loadId,
      started_at: new Date(),
      attempts: 1,
      progress_at: sql`now()`,
    })
    .onConflict((oc) =>
      oc.column('day').doUpdateSet((eb) => ({
        status: 'running',
        _load_id: loadId,
        started_at: new Date(),
        finished_at: null,
        last_error: null,
        attempts: eb('sync_days.attempts', '+', 1),
        progress_at: sql`now()`,
        taken_over_from: sql`case when sync_days.status = 'running' and sync_days._load_id is distinct from ${loadId}::text
          then sync_days._load_id end`,
      })),
    )
    .returning('taken_over_from')
    .executeTakeFirstOrThrow();
  return { takenOverFrom: r.taken_over_from };
}

export async function markDayFailed(db: Kysely<Database>, day: string, error: string): Promise<void> {
  await db
    .updateTable('sync_days')
    .set({ status: 'failed', last_error: error.slice(0, 2000), finished_at: new Date() })
    .where('day', '=', day)
    .execute();
}

/**
 * The watermark: the last day of the unbroken run of complete days that starts at the earliest
 * day in the ledger. A failed or missing day stops it, so a scheduled sync goes back to it.
 */
export async function getWatermark(db: Kysely<Database>): Promise<string | null> {
  const r = await sql<{ watermark: string | null }>`
    with d as (
      select day, status, row_number() over (order by day) as n,
             (day - (select min(day) from sync_days))::int + 1 as span
      from sync_days
    )
    select max(day)::text as watermark from d
    where n = span and status = 'complete'
      and not exists (select 1 from d d2 where d2.day <= d.day and d2.status <> 'complete')`.execute(db);
  return r.rows[0]?.watermark ?? null;
}

/** How far back a scheduled sync looks for days whose export was not known complete. */
export const INCOMPLETE_REPULL_DAYS = 31;

export interface WindowPlan {
  from: string;
  to: string;
  days: string[];
}

/**
 * The window of a scheduled sync: from the watermark minus the lookback (late data) to yesterday
 * (UTC). With no ledger yet it is just yesterday; a caller passes explicit dates for backfills.
 */
export async function planWindow(
  db: Kysely<Database>,
  opts: { lookbackDays: number; now?: Date; from?: string; to?: string },
): Promise<WindowPlan> {
  const yesterday = shiftDay(utcDay(opts.now ?? new Date()), -1);
  const to = opts.to ?? yesterday;
  let from = opts.from;
  if (!from) {
    const wm = await getWatermark(db);
    from = wm ? shiftDay(wm, -opts.lookbackDays + 1) : to;
    if (wm && shiftDay(wm, 1) < from) from = shiftDay(wm, 1);
    // A day whose last export was not known complete (an error page with status 200, a body
    // without its final newline) loaded what arrived and deleted nothing; it is pulled again by
    // every scheduled sync until a complete export of it arrives, up to a month back. The
    // watermark itself does not stop there: a day that is really empty reads the same.
    const since = shiftDay(to, -(INCOMPLETE_REPULL_DAYS - 1));
    const r = await db
      .selectFrom('sync_days')
      .select((eb) => eb.fn.min('day').as('day'))
      .where('export_complete', '=', false)
      .where('day', '>=', since)
      .where('day', '<=', to)
      .executeTakeFirst();
    const incomplete = r?.day ?? null;
    if (incomplete !== null && incomplete < from) from = incomplete;
  }
  if (from > to) return { from, to, days: [] };
  return { from, to, days: dayRange(from, to) };
}

/**
 * Closes a run with totals summed from the days it loaded (rather than added as each day ends,
 * which a retried day would count twice).
 */
export async function finishRunFromDays(
  db: Kysely<Database>,
  loadId: string,
  status: Exclude<RunStatus, 'running'>,
  error?: string,
): Promise<RunTotals> {
  const r = await db
    .selectFrom('sync_days')
    .select((eb) => [
      eb.fn.coalesce(eb.fn.sum<number>('rows_read'), eb.lit(0)).as('rowsRead'),
      eb.fn.coalesce(eb.fn.sum<number>('rows_inserted'), eb.lit(0)).as('inserted'),
      eb.fn.coalesce(eb.fn.sum<number>('rows_updated'), eb.lit(0)).as('updated'),
      eb.fn.coalesce(eb.fn.sum<number>('rows_unchanged'), eb.lit(0)).as('unchanged'),
      eb.fn.coalesce(eb.fn.sum<number>('rows_rejected'), eb.lit(0)).as('rejected'),
      eb.fn.coalesce(eb.fn.sum<number>('rows_deleted'), eb.lit(0)).as('deleted'),
      eb.fn.coalesce(eb.fn.sum<number>('bytes'), eb.lit(0)).as('bytes'),
    ])
    .where('_load_id', '=', loadId)
    .executeTakeFirstOrThrow();
  const totals: RunTotals = {
    rowsRead: Number(r.rowsRead),
    inserted: Number(r.inserted),
    updated: Number(r.updated),
    unchanged: Number(r.unchanged),
    rejected: Number(r.rejected),
    deleted: Number(r.deleted),
    bytes: Number(r.bytes),
  };
  await finishRun(db, loadId, status, totals, error);
  return totals;
}

/**
 * Adds a load's soft-deletes of a day to what it recorded before and returns the sum, in the
 * transaction of the deletes: a finalize retried after they committed finds nothing left to
 * delete, and the day still reports what the load deleted.
 */
export async function addDayDeletes(
  client: { query: (text: string, values: unknown[]) => Promise<{ rows: { n: number | string }[] }> },
  loadKey: string,
  day: string,
  deleted: number,
): Promise<number> {
  const r = await client.query(
    `insert into load_day_deletes (load_key, day, rows_deleted) values ($1, $2, $3)
     on conflict (load_key, day) do update set rows_deleted = load_day_deletes.rows_deleted + excluded.rows_deleted
     returning rows_deleted as n`,
    [loadKey, day, deleted],
  );
  return Number(r.rows[0]?.n ?? deleted);
}
