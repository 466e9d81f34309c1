import { type Kysely, sql } from 'kysely';
import type { Database, Executor } from './types.ts';

/**
 * Deletes the guard held (src/ingest/finalize.ts): a known complete export of a day that would
 * have soft-deleted more than CRS_DELETE_GUARD percent of its live rows stores those ids in
 * `held_deletes` instead. An operator reviews them (`crs-sync deletes list`) and applies them
 * (`crs-sync deletes apply`); a later known complete load of the day replaces the set.
 */

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
  }>`
    select h.day::text as day, count(*)::bigint as held,
           count(m.message_id)::bigint as applicable,
           (select count(*) from analytics_messages a where a.message_date = h.day and a._deleted_at is null)::bigint
             as live,
           max(h.load_id) as load_id, max(h.held_at) as held_at,
           (select d.deletes_held_reason from sync_days d where d.day = h.day) as reason
    from held_deletes h
    left join analytics_messages m
      on m.message_id = h.message_id and m.message_date = h.day and m._deleted_at is null
         and m._loaded_at <= h.held_at
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
}

/**
 * Soft-deletes the held rows of the given days (all held days when `days` is undefined), each day
 * in one transaction. Each id is checked again: only a row still live, still of that day and not
 * written by a load since it was held is deleted (the source may have sent it again meanwhile).
 * The day's held set is emptied either way, and its applied deletes count in `rows_deleted`.
 */
export async function applyHeldDeletes(db: Kysely<Database>, days?: string[]): Promise<AppliedDay[]> {
  const targets =
    days ??
    (await db.selectFrom('held_deletes').select('day').distinct().orderBy('day').execute()).map((d) => d.day);
  const out: AppliedDay[] = [];
  for (const day of targets) {
    const res = await db.transaction().execute(async (tx) => {
      const r = await sql<{ held: number; deleted: number }>`
        with h as (delete from held_deletes where day = ${day}::date returning message_id, held_at),
             d as (
               update analytics_messages m set _deleted_at = now() from h
               where m.message_id = h.message_id and m.message_date = ${day}::date
                 and m._deleted_at is null and m._loaded_at <= h.held_at
               returning m.message_id)
        select (select count(*) from h)::bigint as held, (select count(*) from d)::bigint as deleted`.execute(
        tx,
      );
      const held = Number(r.rows[0]?.held ?? 0);
      const deleted = Number(r.rows[0]?.deleted ?? 0);
      await sql`
        update sync_days set deletes_held = 0, deletes_held_reason = null,
          rows_deleted = rows_deleted + ${deleted}
        where day = ${day}::date`.execute(tx);
      return { day, held, deleted, skipped: held - deleted };
    });
    out.push(res);
  }
  return out;
}
