import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createServiceClient } from '../../src/api/index.ts';
import { sumCounts } from '../../src/common/counts.ts';
import { closedDayLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { loadExportDay } from '../../src/ingest/source/export-day.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { closeRun, startRun } from '../../src/warehouse/ledger.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * A warehouse loaded the way crs-sync loads one, for the dashboard's tests: the simulator's
 * export over real HTTP through the loader (a sync run of every day but the last, with malformed
 * and poison lines quarantined), one day whose export keeps failing (a failed day and a failed
 * run), a partial file of a loaded day imported as complete (deletes past the guard: held), and
 * every thread enriched through the thread API. Nothing is written by hand.
 */
export interface LoadedWarehouse {
  tw: TestWarehouse;
  sim: Simulator;
  /** The simulator's days that were loaded (complete), oldest first. */
  days: string[];
  failedDay: string;
  heldDay: string;
  dispose(): Promise<void>;
}

const log = createLogger({ level: 'silent', pretty: false });

export async function loadWarehouse(seed: number): Promise<LoadedWarehouse> {
  const sim = await startSimulator({
    seed,
    days: 8,
    recordsPerDay: 40,
    faults: 'malformed=0.01,poison=0.005,poison-history=0.01',
    now: runningClock(PINNED),
  });
  const tw = await createTestWarehouse({ prefix: 'dash' });
  try {
    const all = sim.truth.days().filter((d) => sim.truth.exportDayLines(d).length > 0);
    // The last day fails; the others load.
    const failedDay = all[all.length - 1] as string;
    const days = all.slice(0, -1);
    const config = parseConfig({ ...sim.env(), CRS_BATCH_SIZE: '50', CRS_RATE_LIMIT_RPS: '1000' });
    const client = (faults?: string) =>
      createServiceClient(
        {
          ...config.api,
          concurrency: 4,
          maxRetries: 1,
          baseBackoffMs: 5,
          maxBackoffMs: 20,
          maxRetryAfterMs: 20,
          ...(faults ? { extraHeaders: { 'x-sim-faults': faults } } : {}),
        },
        log,
      );
    const db = tw.w.db;
    const from = days[0] as string;
    await startRun(db, { runId: 'sync-1', kind: 'manual', windowStart: from, windowEnd: failedDay });
    const loaded = [];
    for (const day of days) {
      loaded.push(
        await loadExportDay(
          { warehouse: tw.w, client: client(), config, log },
          { target: closedDayLoad('sync-1', day) },
        ),
      );
    }
    await closeRun(db, 'sync-1', 'succeeded', sumCounts(...loaded));

    await startRun(db, { runId: 'sync-2', kind: 'manual', windowStart: failedDay, windowEnd: failedDay });
    const failure = await loadExportDay(
      { warehouse: tw.w, client: client('5xx=1:100000'), config, log },
      { target: closedDayLoad('sync-2', failedDay) },
    ).then(
      () => new Error(`the export of ${failedDay} was meant to fail`),
      (err: unknown) => err,
    );
    await closeRun(db, 'sync-2', 'failed', undefined, String((failure as Error).message));

    // A file holding a fifth of a loaded day, declared complete: the rest would be deleted, far
    // past CRS_DELETE_GUARD (10%), so the deletes are held for review.
    const heldDay = days[1] as string;
    const dir = await mkdtemp(path.join(tmpdir(), 'dash-'));
    const lines = sim.truth.exportDayLines(heldDay);
    const file = path.join(dir, `${heldDay}.jsonl`);
    writeFileSync(file, `${lines.slice(0, Math.ceil(lines.length / 5)).join('\n')}\n`);
    await importFile(tw.w, config, log, {
      file,
      loadId: 'import-1',
      wholeDays: { from: heldDay, to: heldDay },
    });
    await rm(dir, { recursive: true, force: true });

    const ops = createEnrichOps({ db, pool: tw.w.pool, api: client(), log, concurrency: 4, pageSize: 20 });
    let after: string | null = null;
    for (;;) {
      const ids = await ops.listPendingThreads({ afterThreadId: after, limit: 50 });
      if (ids.length === 0) break;
      await ops.enrichThreads({ threadIds: ids, loadId: 'enrich-1' });
      after = ids[ids.length - 1] ?? null;
    }
    return {
      tw,
      sim,
      days,
      failedDay,
      heldDay,
      dispose: async () => {
        await sim.close();
        await tw.dispose();
      },
    };
  } catch (err) {
    await sim.close();
    await tw.dispose();
    throw err;
  }
}
