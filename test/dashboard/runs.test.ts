import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALE_AFTER_MS } from '../../src/common/activity-timeouts.ts';
import { type Dashboard, startDashboard } from '../../src/dashboard/server.ts';
import { startRun } from '../../src/warehouse/ledger.ts';
import { readStatus } from '../../src/warehouse/read/status.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The health page's recent runs and `crs-sync status`'s are one query (src/warehouse/read/runs.ts):
 * a run left `running` by a worker that is gone reads `abandoned` on both, a live one `running`.
 */
let tw: TestWarehouse;
let dash: Dashboard;

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'dash_runs' });
  dash = await startDashboard({ pool: tw.w.pool, port: 0 });
  await startRun(tw.w.db, { runId: 'gone-run', kind: 'manual', workflowId: 'wf-gone' });
  await startRun(tw.w.db, { runId: 'live-run', kind: 'manual', workflowId: 'wf-live' });
  await tw.w.pool.query(
    `update sync_runs set progress_at = now() - $1::interval where load_id = 'gone-run'`,
    [`${Math.ceil((STALE_AFTER_MS * 2) / 1000)} seconds`],
  );
});

afterAll(async () => {
  await dash?.close();
  await tw?.dispose();
});

describe("the dashboard's recent runs", () => {
  it('when a run shows no sign of life past the stale time, then the health page shows it abandoned, as status does', async () => {
    const res = await fetch(`${dash.url}/api/health`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      sections: { runs: { ok: boolean; data: { loadId: string; status: string }[] } };
    };
    expect(body.sections.runs.ok).toBe(true);
    const shown = Object.fromEntries(body.sections.runs.data.map((r) => [r.loadId, r.status]));
    expect(shown).toEqual({ 'gone-run': 'abandoned', 'live-run': 'running' });

    const status = await readStatus(tw.w.db);
    expect(Object.fromEntries(status.recentRuns.map((r) => [r.loadId, r.status]))).toEqual(shown);

    const html = await (await fetch(`${dash.url}/health`)).text();
    expect(html).toContain('<span class="status s-abandoned">abandoned</span>');
  });
});
