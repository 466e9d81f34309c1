import { type Kysely, sql } from 'kysely';
import { clearDayHold } from './ledger.ts';
import type { Database, Executor } from './types.ts';

/**
 * Deletes the guard held (src/ingest/finalize/delete-step.ts): a known complete export of a day that would
 * have soft-deleted more than CRS_DELETE_GUARD percent of its live rows (or whose load's deletes
 * over all its complete days would, or that quarantined a line whose id could not be read) stores
 * those ids in `held_deletes` instead. An operator reviews them (`crs-sync deletes list`) and
 * applies them (`crs-sync deletes apply`); a later known complete load of the day replaces the set,
 * and any later load that sees a held id takes it out of the set (src/ingest/finalize/finalize.ts `settleHeld`).
 */

/**
 * Whether the held id `h` (a row of `held_deletes`) is still to be deleted, with `m` its live row:
 * still live, still of the held day, not written since it was held. `deletes list` counts with it
 * and `deletes apply` deletes with it, so both say the same of every id. Used as the condition of
 * a join of `analytics_messages m` to `held_deletes h`.
 */
const STILL_APPLICABLE = sql`m.message_id = h.message_id and m.message_date = h.day
  and m._deleted_at is null and m._loaded_at <= h.held_at`;

export interface HeldDay {
  day: string;
  held: number;
  /** Of them, rows still live and of that day: what `apply` would delete now. */
  applicable: number;
  /** The day's live rows now, for the share. */
  live: number;
  loadId: string;
  heldAt: string;
  reason: string | null;
  /** Why `apply` applies this day only when named with --force; null when it may apply it. */
  forceReason: string | null;
}

export async function listHeldDeletes(db: Executor, day?: string): Promise<HeldDay[]> {
  const r = await sql<{
    day: string;
    held: number;
    applicable: number;
    live: number;
    load_id: string;
    held_at: Date;
    reason: string | null;
    force_reason: string | null;
  }>`
    select h.day::text as day, count(*)::bigint as held,
           count(m.message_id)::bigint as applicable,
           (select count(*) from analytics_messages a where a.message_date = h.day and a._deleted_at is null)::bigint
             as live,
           max(h.load_id) as load_id, max(h.held_at) as held_at,
           (select d.deletes_held_reason from sync_days d where d.day = h.day) as reason,
           (select d.deletes_force_reason from sync_days d where d.day = h.day) as force_reason
    from held_deletes h
    left join analytics_messages m on ${STILL_APPLICABLE}
    where ${day === undefined ? sql`true` : sql`h.day = ${day}::date`}
    group by h.day
    order by h.day`.execute(db);
  return r.rows.map((x) => ({
    day: x.day,
    held: Number(x.held),
    applicable: Number(x.applicable),
    live: Number(x.live),
    loadId: x.load_id,
    heldAt: x.held_at.toISOString(),
    reason: x.reason,
    forceReason: x.force_reason,
  }));
}

/** The held message ids of one day, for review. */
export async function heldIds(db: Executor, day: string, limit: number): Promise<string[]> {
  const r = await db
    .selectFrom('held_deletes')
    .select('message_id')
    .where('day', '=', day)
    .orderBy('message_id')
    .limit(limit)
    .execute();
  return r.map((x) => x.message_id);
}

export interface AppliedDay {
  day: string;
  held: number;
  /** Rows soft-deleted now. */
  deleted: number;
  /** Held ids left alone: no longer live, no longer of that day, or loaded again after they were held. */
  skipped: number;
  /** Why the day was not applied (it needs --force); null when it was. Its held set is kept then. */
  notApplied: string | null;
}

/**
 * Soft-deletes the held rows of the given days (all held days when `days` is undefined), each day
 * in one transaction. Each id is checked again (STILL_APPLICABLE): the source may have sent it
 * again meanwhile. The day's held set is emptied, and its ledger's `rows_deleted` counted again.
 * A day with a force reason is left as it is unless `force` (the caller named the days).
 */
export async function applyHeldDeletes(
  db: Kysely<Database>,
  days?: string[],
  opts: { force?: boolean } = {},
): Promise<AppliedDay[]> {
  const targets =
    days ??
    (await db.selectFrom('held_deletes').select('day').distinct().orderBy('day').execute()).map((d) => d.day);
  const out: AppliedDay[] = [];
  for (const day of targets) {
    const res = await db.transaction().execute(async (tx) => {
      // Locks the ledger row: a load's finalize changing the day's hold waits, or is waited for.
      const state = await sql<{ force_reason: string | null }>`
        select deletes_force_reason as force_reason from sync_days where day = ${day}::date for update`.execute(
        tx,
      );
      const forceReason = state.rows[0]?.force_reason ?? null;
      if (forceReason !== null && !opts.force) {
        const n = await sql<{ n: number }>`
          select count(*)::bigint as n from held_deletes where day = ${day}::date`.execute(tx);
        const held = Number(n.rows[0]?.n ?? 0);
        return { day, held, deleted: 0, skipped: held, notApplied: forceReason };
      }
      const r = await sql<{ held: number; deleted: number }>`
        with h as (delete from held_deletes where day = ${day}::date returning day, message_id, held_at),
             d as (
               update analytics_messages m set _deleted_at = now() from h
               where ${STILL_APPLICABLE}
               returning m.message_id)
        select (select count(*) from h)::bigint as held, (select count(*) from d)::bigint as deleted`.execute(
        tx,
      );
      const held = Number(r.rows[0]?.held ?? 0);
      const deleted = Number(r.rows[0]?.deleted ?? 0);
      // After the update above: a statement sees the rows its transaction's earlier ones wrote.
      await clearDayHold(tx, day);
      return { day, held, deleted, skipped: held - deleted, notApplied: null };
    });
    out.push(res);
  }
  return out;
}
