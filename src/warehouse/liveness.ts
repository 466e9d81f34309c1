import { sql } from 'kysely';
import { STALE_AFTER_MS } from '../common/liveness.ts';

/**
 * The last sign of life of a run or of a day's load: `progress_at` (its start, its activities'
 * heartbeats) or its load's last batch commit (a checkpoint row's `updated_at`; an import's load
 * key is its load id, an export day's the load id and the day). SQL over `sync_runs r` and
 * `sync_days d`; as text for the read model's plain SQL (read/runs.ts).
 */
export const RUN_ALIVE_AT_SQL = `greatest(r.progress_at,
  (select max(c.updated_at) from load_checkpoints c where c.load_key = r.load_id))`;
export const RUN_ALIVE_AT = sql<Date>`${sql.raw(RUN_ALIVE_AT_SQL)}`;
export const DAY_ALIVE_AT = sql<Date>`greatest(d.progress_at,
  (select max(c.updated_at) from load_checkpoints c where c.load_key = d._load_id || ':' || to_char(d.day, 'YYYY-MM-DD')))`;

/** Whether a `running` run or day last showed a sign of life before `staleAfterMs` ago. */
export function isStale(aliveAt: Date | null, now: Date, staleAfterMs = STALE_AFTER_MS): boolean {
  return aliveAt === null || now.getTime() - aliveAt.getTime() > staleAfterMs;
}
