import type { Logger } from '../src/log.ts';
import type { Warehouse } from '../src/warehouse/db.ts';
import { touchRun } from '../src/warehouse/ledger.ts';

/** Records that a run (and its load of a day) is alive; never waits, never throws. */
export type Liveness = (runId: string, day?: string) => void;

const ALIVE_EVERY_MS = 15_000;

/**
 * Records that a run (and its load of a day) is alive, at most every 15 s per run and day, in the
 * background: the ledger's `progress_at`, against which a run that reads `running` but is dead
 * (terminated, its worker gone) is told apart. A failed write only loses one sign of life. One
 * per worker: every activity of a run writes through it.
 */
export function createLiveness(db: Warehouse['db'], log: Logger): Liveness {
  const last = new Map<string, number>();
  return (runId, day) => {
    const key = day === undefined ? runId : `${runId}:${day}`;
    const now = Date.now();
    if (now - (last.get(key) ?? 0) < ALIVE_EVERY_MS) return;
    last.set(key, now);
    if (last.size > 10_000) last.clear();
    touchRun(db, runId, day).catch((err: unknown) =>
      log.debug({ err, runId, day }, 'could not record a sign of life'),
    );
  };
}
