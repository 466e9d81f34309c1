import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALE_AFTER_MS } from '../../src/common/activity-timeouts.ts';
import { startRun } from '../../src/warehouse/ledger.ts';
import { abandonedAfterMinutes, readStatus } from '../../src/warehouse/read/status.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * "Abandoned" is one rule in the warehouse (the liveness views and `abandoned_after()`): what
 * `crs-sync status` lists, what `sync_health` counts and what the next run marks are the same
 * runs and days, under the threshold the activity timeouts imply.
 */
describe('runs and days taken for abandoned', () => {
  let tw: TestWarehouse;
  const minutesAgo = (n: number) => `now() - interval '${n} minutes'`;
  const threshold = STALE_AFTER_MS / 60_000;

  beforeAll(async () => {
    tw = await createTestWarehouse({ migrate: true });
    const q = (text: string) => tw.w.pool.query(text);
    // Runs: silent past the threshold, silent just within it, silent but with a recent batch
    // commit, marked abandoned already, finished long ago.
    await q(`insert into sync_runs (load_id, kind, status, started_at, progress_at) values
      ('run-silent', 'manual', 'running', ${minutesAgo(60)}, ${minutesAgo(threshold + 1)}),
      ('run-quiet', 'manual', 'running', ${minutesAgo(60)}, ${minutesAgo(threshold - 1)}),
      ('run-committing', 'import', 'running', ${minutesAgo(60)}, ${minutesAgo(threshold * 3)}),
      ('run-marked', 'manual', 'abandoned', ${minutesAgo(90)}, ${minutesAgo(90)}),
      ('run-done', 'manual', 'succeeded', ${minutesAgo(120)}, ${minutesAgo(110)})`);
    await q(`insert into load_checkpoints (load_key, part, parts, updated_at) values
      ('run-committing', 0, 1, now()), ('run-silent:2026-11-03', 0, 1, now())`);
    // Days: the same cases, a day loaded by run-silent whose last batch commit is recent, and a
    // running day with no sign of life recorded at all.
    await q(`insert into sync_days (day, status, _load_id, attempts, progress_at) values
      ('2026-11-01', 'running', 'run-silent', 1, ${minutesAgo(threshold + 1)}),
      ('2026-11-02', 'running', 'run-quiet', 1, ${minutesAgo(threshold - 1)}),
      ('2026-11-03', 'running', 'run-silent', 1, ${minutesAgo(threshold * 3)}),
      ('2026-11-04', 'running', 'run-gone', 2, null),
      ('2026-11-05', 'complete', 'run-done', 1, ${minutesAgo(110)})`);
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when the warehouse is migrated, then its threshold is the one the activity timeouts imply (14 minutes)', async () => {
    expect(await abandonedAfterMinutes(tw.w.db)).toBe(threshold);
    expect(threshold).toBe(14);
  });

  it('when status, sync_health and the next run judge the same runs and days, then they agree, a day with no sign of life at all included', async () => {
    const s = await readStatus(tw.w.db);
    const shownAbandoned = s.recentRuns.filter((r) => r.status === 'abandoned').map((r) => r.loadId);
    expect(shownAbandoned.sort()).toEqual(['run-marked', 'run-silent']);
    expect(s.abandonedDays.map((d) => d.day)).toEqual(['2026-11-01', '2026-11-04']);
    expect(s.days).toMatchObject({ abandoned: 2, running: 2, complete: 1 });

    const health = await tw.w.pool.query<{ abandoned_days: number; abandoned_runs: number }>(
      'select abandoned_days, abandoned_runs from sync_health',
    );
    expect(health.rows[0]).toEqual({
      abandoned_days: s.abandonedDays.length,
      abandoned_runs: shownAbandoned.length,
    });

    const { abandoned } = await startRun(tw.w.db, { runId: 'run-next', kind: 'scheduled' });
    expect(abandoned).toEqual(['run-silent']);
  });
});
