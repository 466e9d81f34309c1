import { sql } from 'kysely';
import type { Executor } from '../types.ts';

/**
 * What the alert checks read (src/alerts/checks.ts judges it): the failed days, what became of the
 * days of open `day_failed` incidents, the held deletes per day, the days whose quarantine share
 * is over a limit, the shared budgets paused past a limit. The freshness, the thread list's reads
 * and the open drift they read too are freshness.ts's, thread-list.ts's and schema-drift.ts's.
 */

/** A day whose load stopped retrying (`failed` in the ledger), with its attempts and last error. */
export interface FailedDayRow {
  day: string;
  attempt: number;
  max_attempts: number | null;
  last_error: string | null;
  last_error_code: string | null;
}

/** The failed days, in day order. */
export async function readFailedDays(db: Executor): Promise<FailedDayRow[]> {
  return await db
    .selectFrom('sync_days')
    .select(['day', 'attempt', 'max_attempts', 'last_error', 'last_error_code'])
    .where('status', '=', 'failed')
    .orderBy('day')
    .execute();
}

/** The ledger's row now of an open `day_failed` incident's day (null fields: no longer in the ledger). */
export interface FailedDayNow {
  key: string;
  day: string;
  status: string | null;
  attempt: number | null;
  finished_at: Date | null;
  started_at: Date | null;
  code: string | null;
}

/** The open `day_failed` incidents whose day is no longer failed, with the day as the ledger has it. */
export async function readFailedDaysSince(db: Executor): Promise<FailedDayNow[]> {
  const r = await sql<FailedDayNow>`
    select i.key, i.details->>'day' as day, d.status, d.attempt, d.finished_at, d.started_at,
           d.last_error_code as code
      from alert_incidents i
      left join sync_days d on d.day = (i.details->>'day')::date
     where i.kind = 'day_failed' and i.resolved_at is null and d.status is distinct from 'failed'`.execute(
    db,
  );
  return r.rows;
}

/** Deletes the guard holds, counted per day, in day order. */
export async function readHeldDeleteDays(db: Executor): Promise<{ day: string; n: number }[]> {
  return await db
    .selectFrom('held_deletes')
    .select(['day', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy('day')
    .orderBy('day')
    .execute();
}

/** The days whose last load quarantined more than `share` of the lines it read, in day order. */
export async function readQuarantineSpikes(
  db: Executor,
  share: number,
): Promise<{ day: string; rows_read: number; rows_rejected: number }[]> {
  return await db
    .selectFrom('sync_days')
    .select(['day', 'rows_read', 'rows_rejected'])
    .where('rows_read', '>', 0)
    .where(sql<boolean>`rows_rejected::float8 / rows_read > ${share}`)
    .orderBy('day')
    .execute();
}

/**
 * The shared request budgets paused (the service's Retry-After) for longer than `limitMs` from
 * now, with how long (`rate_budget`, where every worker's waits meet), in name order.
 */
export async function readStarvedBudgets(
  db: Executor,
  limitMs: number,
): Promise<{ name: string; wait_ms: number }[]> {
  const r = await sql<{ name: string; wait_ms: number }>`
    select name, (extract(epoch from paused_until - clock_timestamp()) * 1000)::float8 as wait_ms
      from rate_budget
     where paused_until > clock_timestamp() + ${limitMs} * interval '1 millisecond'
     order by name`.execute(db);
  return r.rows;
}
