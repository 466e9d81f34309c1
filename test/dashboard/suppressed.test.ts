import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dayLoad } from '../../src/common/load-target.ts';
import { type Dashboard, startDashboard } from '../../src/dashboard/server.ts';
import { runLoad } from '../../src/ingest/merge/load.ts';
import { createLogger } from '../../src/log.ts';
import { closeRun, markDayRunning, startRun } from '../../src/warehouse/ledger.ts';
import { forget } from '../../src/warehouse/privacy/forget.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The health page shows the lines a load dropped because `crs-sync forget` erased their user
 * (`rows_suppressed`), per run and per day, as it shows the rejected ones: a column only once a
 * run or day has some, the figure always in the section's JSON.
 */
const log = createLogger({ level: 'silent', pretty: false });
const DAY = '2026-11-20';
const records = makeRecords(30, { seed: 'dash-suppressed', day: DAY, threads: 5 });
const user = records[0]!['User ID'];
const mine = records.filter((r) => r['User ID'] === user).length;

let tw: TestWarehouse;
let dash: Dashboard;

/** A sync run of one closed day, as the workflow records it: the run, the day's load, its close. */
async function syncDay(runId: string): Promise<void> {
  await startRun(tw.w.db, { runId, kind: 'manual', workflowId: `wf-${runId}` });
  await markDayRunning(tw.w.db, DAY, runId);
  const body = Buffer.from(toJsonl(records));
  const summary = await runLoad({
    warehouse: tw.w,
    log,
    target: dayLoad(runId, DAY, false),
    open: async () =>
      (async function* () {
        yield body;
      })(),
    batchSize: 50,
    parts: 2,
    maxLineBytes: 1 << 20,
  });
  await closeRun(tw.w.db, runId, 'succeeded', summary);
}

interface Health {
  sections: {
    runs: { ok: boolean; data: { loadId: string; rejected: number; suppressed: number }[] };
    days: { ok: boolean; data: { day: string; suppressed: number; rowsRead: number }[] };
  };
}

async function health(): Promise<{ json: Health; html: string }> {
  const q = `from=${DAY}&to=${DAY}`;
  const res = await fetch(`${dash.url}/api/health?${q}`);
  expect(res.status).toBe(200);
  const json = (await res.json()) as Health;
  const html = await (await fetch(`${dash.url}/health?${q}`)).text();
  return { json, html };
}

/** The cells of a column (`data-col`) of one of the page's tables, in row order. */
function cells(html: string, table: string, col: string): string[] {
  const at = html.indexOf(`data-table="${table}"`);
  if (at < 0) return [];
  const t = html.slice(at, html.indexOf('</table>', at));
  return [...t.matchAll(new RegExp(`<td data-col="${col}"[^>]*>([^<]*)</td>`, 'g'))].map((m) => m[1] ?? '');
}

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'dash_supp' });
  dash = await startDashboard({ pool: tw.w.pool, port: 0 });
  await syncDay('run-before');
});

afterAll(async () => {
  await dash?.close();
  await tw?.dispose();
});

describe("the health page's suppressed lines", () => {
  it('when no load has suppressed anything, then the runs and days show no suppressed column, and 0 in the JSON', async () => {
    const { json, html } = await health();
    expect(json.sections.runs.data).toEqual([
      expect.objectContaining({ loadId: 'run-before', suppressed: 0 }),
    ]);
    expect(json.sections.days.data).toEqual([expect.objectContaining({ day: DAY, suppressed: 0 })]);
    expect(cells(html, 'runs', 'rejected')).toEqual(['0']);
    expect(cells(html, 'runs', 'suppressed')).toEqual([]);
    expect(cells(html, 'days', 'suppressed')).toEqual([]);
    expect(html).not.toContain('<th class="num">Suppressed</th>');
  });

  it("when the day is pulled again after a user is forgotten, then the run and the day show the user's lines suppressed", async () => {
    await forget(tw.w.pool, { users: [user], threads: [] }, { reason: 'DSR' });
    await syncDay('run-after');
    const { json, html } = await health();
    const runs = Object.fromEntries(json.sections.runs.data.map((r) => [r.loadId, r.suppressed]));
    expect(runs).toEqual({ 'run-before': 0, 'run-after': mine });
    // The day's ledger row is its last load's.
    expect(json.sections.days.data).toEqual([
      expect.objectContaining({ day: DAY, rowsRead: records.length, suppressed: mine }),
    ]);
    // Newest run first.
    expect(cells(html, 'runs', 'suppressed')).toEqual([String(mine), '0']);
    expect(cells(html, 'days', 'suppressed')).toEqual([String(mine)]);
    expect(html).toContain('<th class="num">Suppressed</th>');
  });
});
