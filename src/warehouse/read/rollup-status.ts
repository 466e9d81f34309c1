import { ROLLUP_TABLES } from '../rollups/rebuild.ts';
import { type Queryable, rowsOf } from './queryable.ts';
import { readSource } from './source.ts';

/** What `crs-sync rollups status` shows. */
export interface RollupStatus {
  /** Whether readers read the rollups now (`readSource`): nothing marked, no rebuild pending. */
  current: boolean;
  rebuildNeeded: boolean;
  markedDays: number;
  markedThreads: number;
  /**
   * Days a running pull has written to, read meanwhile as the last pull of each left them: their
   * marks wait for the pull's finalize (src/warehouse/rollups/mark.ts `marksWaitSql`).
   */
  waitingDays: string[];
  refreshedAt: string | null;
  rebuiltAt: string | null;
  /** Rows of each rollup table. */
  rows: Record<string, number>;
}

export async function rollupStatus(q: Queryable): Promise<RollupStatus> {
  const current = (await readSource(q)) === 'rollup';
  const [s] = await rowsOf<{
    rebuild_needed: boolean;
    rebuilt_at: string | null;
    refreshed_at: string | null;
  }>(q, 'select rebuild_needed, rebuilt_at::text, refreshed_at::text from rollup_upkeep');
  const [marks] = await rowsOf<{ days: number; threads: number }>(
    q,
    `select (select count(distinct day) from rollup_marked_days)::int as days,
            (select count(distinct thread_id) from rollup_marked_threads)::int as threads`,
  );
  const [waiting] = await rowsOf<{ days: string[] }>(
    q,
    'select coalesce(array_agg(distinct day::text order by day::text), array[]::text[]) as days from rollup_waiting',
  );
  const rows: Record<string, number> = {};
  for (const t of ROLLUP_TABLES) {
    const [r] = await rowsOf<{ n: number }>(q, `select count(*)::bigint as n from ${t}`);
    rows[t] = Number(r?.n ?? 0);
  }
  return {
    current,
    rebuildNeeded: s?.rebuild_needed ?? true,
    markedDays: marks?.days ?? 0,
    markedThreads: marks?.threads ?? 0,
    waitingDays: waiting?.days ?? [],
    refreshedAt: s?.refreshed_at ?? null,
    rebuiltAt: s?.rebuilt_at ?? null,
    rows,
  };
}
