import type { SyncOps } from '../../activities/ops.ts';
import type { Warehouse } from '../../src/warehouse/db.ts';
import { markDayRunning } from '../../src/warehouse/ledger.ts';

/**
 * A stand-in for the export loader, for the tests of workflow structure only (attach, continue-
 * as-new, cancellation): it keeps the ledger the way the loader does and takes `delayMs` per
 * day, stopping when cancelled. It counts how many loads of each day started.
 */
export function fakeLoaderOps(w: Warehouse, opts: { delayMs?: number; failDays?: string[] } = {}) {
  const starts = new Map<string, number>();
  const ops: Partial<SyncOps> = {
    async loadDay({ target: { day, runId: loadId }, signal, onProgress }) {
      starts.set(day, (starts.get(day) ?? 0) + 1);
      await markDayRunning(w.db, day, loadId);
      const steps = 10;
      for (let i = 1; i <= steps; i++) {
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(resolve, (opts.delayMs ?? 0) / steps);
          signal.addEventListener(
            'abort',
            () => {
              clearTimeout(t);
              reject(signal.reason);
            },
            { once: true },
          );
        });
        onProgress({ linesCommitted: i * 10, rowsRead: i * 10, bytesRead: i * 1000 });
      }
      if (opts.failDays?.includes(day)) {
        const { CrsError } = await import('../../src/errors.ts');
        throw new CrsError('HTTP_UNAUTHORIZED', 'service refused the token');
      }
      await w.db
        .updateTable('sync_days')
        .set({ status: 'complete', rows_read: 100, lines_committed: 100, finished_at: new Date() })
        .where('day', '=', day)
        .execute();
      return {
        day,
        runId: loadId,
        linesRead: 100,
        bytesRead: 10_000,
        rowsRead: 100,
        inserted: 100,
        updated: 0,
        unchanged: 0,
        rejected: 0,
        deleted: 0,
        threadsQueued: 0,
      };
    },
    async listPendingThreads() {
      return [];
    },
  };
  return { ops, starts };
}
