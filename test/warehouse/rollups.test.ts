import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { parseConfig } from '../../src/config.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { ROLLUP_TABLES, rebuildRollups } from '../../src/warehouse/rollups/rebuild.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import { rollupsCurrent, threadTotalsFromRollups } from '../../src/warehouse/rollups/status.ts';
import { simulatorOptions } from '../api/helpers/client-setup.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The rollups kept incrementally by the loader's finalize and the enrichment's batches equal the
 * rollups rebuilt from the raw tables, after every kind of change: a first load, an unchanged
 * re-load, a load that changes, moves and withdraws records (soft deletes), enrichment, a load
 * that brings the withdrawn records back (undeletes) and enrichment that rewrites stored history.
 * The BI views read from the rollups give what their raw-table definitions give.
 */

const log = createLogger({ level: 'silent', pretty: false });
const SEED = 23;
const VIEWS: Record<string, string> = {
  daily_usage: 'message_date',
  user_activity: 'user_id',
  thread_summary: 'thread_id',
  citation_sources: 'citation_type, name',
};

let sim: Simulator;
let tw: TestWarehouse;
let days: string[];
const dir = mkdtempSync(path.join(tmpdir(), 'crs-rollups-'));
let files = 0;
const config = parseConfig({
  CRS_BATCH_SIZE: '25',
  CRS_LOAD_PARTITIONS: '3',
  CRS_DELETE_GUARD: '100',
  CRS_DELETE_GUARD_LOAD: '100',
});

beforeAll(async () => {
  sim = await startSimulator({ seed: SEED, days: 3, recordsPerDay: 40, now: runningClock(PINNED) });
  tw = await createTestWarehouse({ prefix: 'rollup' });
  days = sim.truth.days().slice(-3);
  console.info(`rollups test: simulator seed ${SEED}, days ${days.join(', ')}`);
});
afterAll(async () => {
  await sim?.close();
  await tw?.dispose();
});

/** Loads the lines as a file; returns the load id. */
async function load(lines: string[]): Promise<string> {
  const file = path.join(dir, `f${files++}.jsonl`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  const range = { from: days[0] ?? '', to: days[days.length - 1] ?? '' };
  return (await importFile(tw.w, config, log, { file, wholeDays: range })).loadId;
}

/**
 * The first and last message and the count that the load's finalize wrote for the threads it
 * queued (from the rollups when current, else from the raw rows) = those of their live raw rows.
 */
async function expectThreadTotals(stage: string, loadId: string): Promise<void> {
  const r = await tw.w.pool.query<{ n: number; bad: number }>(
    `select count(*)::int as n,
            count(*) filter (where (t.first_message_at, t.last_message_at, t.message_count)
                                   is distinct from (a.f, a.l, a.c::int))::int as bad
     from threads t
     join (select thread_id, min(message_time) as f, max(message_time) as l, count(*) as c
           from analytics_messages where _deleted_at is null group by thread_id) a on a.thread_id = t.thread_id
     where t._load_id = $1`,
    [loadId],
  );
  expect(r.rows[0]?.n, `${stage}: threads queued`).toBeGreaterThan(0);
  expect(r.rows[0]?.bad, `${stage}: thread aggregates = raw rows'`).toBe(0);
}

async function enrichAll(loadId: string): Promise<void> {
  const api = createServiceClient(simulatorOptions(sim), log);
  const ops = createEnrichOps({ db: tw.w.db, pool: tw.w.pool, api, log, concurrency: 4, pageSize: 5 });
  let after: string | null = null;
  for (;;) {
    const ids = await ops.listPendingThreads({ afterThreadId: after, limit: 10 });
    if (ids.length === 0) break;
    await ops.enrichThreads({ threadIds: ids, loadId });
    after = ids[ids.length - 1] ?? null;
  }
}

/** Every rollup row as text, table by table, in a fixed order. */
async function rollups(): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const t of ROLLUP_TABLES) {
    const r = await tw.w.pool.query<{ r: string }>(`select x::text as r from ${t} x order by 1`);
    out[t] = r.rows.map((row) => row.r);
  }
  return out;
}

/** The four aggregate views; `raw`: as their raw-table branch computes them (a mark forces it). */
async function views(raw: boolean): Promise<Record<string, string[]>> {
  const c = await tw.w.pool.connect();
  try {
    await c.query('begin');
    if (raw) await c.query(`insert into rollup_dirty_days values ('1900-01-01')`);
    const out: Record<string, string[]> = {};
    for (const [v, key] of Object.entries(VIEWS)) {
      const r = await c.query<{ r: string }>(`select x::text as r from ${v} x order by ${key}`);
      out[v] = r.rows.map((row) => row.r);
    }
    return out;
  } finally {
    await c.query('rollback');
    c.release();
  }
}

/** Incremental = rebuilt, and the views over the rollups = the views over the raw tables. */
async function expectExact(stage: string): Promise<Record<string, string[]>> {
  expect(await rollupsCurrent(tw.w.pool), `${stage}: nothing left marked`).toBe(true);
  const incremental = await rollups();
  expect(incremental.rollup_daily?.length, `${stage}: rollup_daily has rows`).toBeGreaterThan(0);
  expect(await views(false), `${stage}: views from rollups = from raw tables`).toEqual(await views(true));
  await rebuildRollups(tw.w.pool, null);
  expect(await rollups(), `${stage}: incremental = rebuild`).toEqual(incremental);
  return incremental;
}

function lineOf(id: number, day: number): string {
  const l = sim.truth.exportDayLines(days[day] ?? '')[id];
  if (l === undefined) throw new Error(`no line ${id} of day ${day}`);
  return l;
}

describe('rollups', () => {
  let original: string[][];
  let changed: string[][];

  it('a first load fills them, and an unchanged re-load writes nothing', async () => {
    original = days.map((d) => sim.truth.exportDayLines(d));
    await expectThreadTotals('first load', await load(original.flat()));
    const first = await expectExact('first load');
    expect(first.rollup_daily).toHaveLength(3);

    const before = await tw.w.pool.query<{ at: string }>('select refreshed_at::text as at from rollup_state');
    await load(original.flat());
    const after = await tw.w.pool.query<{ at: string }>('select refreshed_at::text as at from rollup_state');
    // A refresh that finds nothing marked returns before touching anything.
    expect(after.rows[0]?.at).toBe(before.rows[0]?.at);
    expect(await rollups()).toEqual(first);
  });

  it('enrichment keeps the thread and citation rollups', async () => {
    await enrichAll('enrich-1');
    const r = await expectExact('enriched');
    expect(r.rollup_citation_sources?.length).toBeGreaterThan(0);
    expect(r.rollup_citation_daily?.length).toBeGreaterThan(0);
  });

  it('changed, moved, blanked and withdrawn records (soft deletes), then enrichment again', async () => {
    changed = original.map((d) => [...d]);
    const day0 = changed[0] ?? [];
    const rec = (i: number) => JSON.parse(day0[i] ?? '{}') as Record<string, string>;
    // A longer answer, a blank one (cancelled), a record moved to another thread and user.
    const a = rec(1);
    a.Response = `${a.Response} and more`;
    day0[1] = JSON.stringify(a);
    const b = rec(2);
    b.Response = '   ';
    day0[2] = JSON.stringify(b);
    const c = rec(3);
    const other = JSON.parse(lineOf(0, 2)) as Record<string, string>;
    c['Thread ID'] = other['Thread ID'] ?? '';
    c['User ID'] = other['User ID'] ?? '';
    day0[3] = JSON.stringify(c);
    // Three records withdrawn from day 0, one from day 1.
    changed[0] = day0.filter((_, i) => i < 5 || i > 7);
    changed[1] = (changed[1] ?? []).filter((_, i) => i !== 4);
    await expectThreadTotals('changed and deleted', await load(changed.flat()));
    const deleted = await tw.w.pool.query<{ n: number }>(
      'select count(*)::int as n from analytics_messages where _deleted_at is not null',
    );
    expect(deleted.rows[0]?.n).toBe(4);
    await expectExact('changed and deleted');
    await enrichAll('enrich-2');
    await expectExact('enriched after changes');
  });

  it('withdrawn records that come back (undeletes)', async () => {
    const back = original.map((d, i) => (i === 2 ? d : [...d]));
    back[0] = [...(changed[0] ?? []), ...(original[0] ?? []).slice(5, 8)];
    back[1] = original[1] ?? [];
    await expectThreadTotals('undeleted', await load(back.flat()));
    const deleted = await tw.w.pool.query<{ n: number }>(
      'select count(*)::int as n from analytics_messages where _deleted_at is not null',
    );
    expect(deleted.rows[0]?.n).toBe(0);
    await expectExact('undeleted');
  });

  it('enrichment that rewrites stored history and citations', async () => {
    // Stored state made stale the way a history rewritten upstream leaves it; the enricher reads
    // those threads again from the start and stores what the service holds.
    const t = await tw.w.pool.query<{ thread_id: string }>(
      'select distinct thread_id::text from citations order by 1 limit 3',
    );
    const ids = t.rows.map((r) => r.thread_id);
    expect(ids.length).toBeGreaterThan(0);
    await tw.w.pool.query(`update citations set name = 'stale name' where thread_id = any($1::uuid[])`, [
      ids,
    ]);
    await tw.w.pool.query(
      `update threads set history_count = 0, enrich_status = 'pending', enrich_requested_at = now()
       where thread_id = any($1::uuid[])`,
      [ids],
    );
    expect(await rollupsCurrent(tw.w.pool)).toBe(false);
    await enrichAll('enrich-3');
    const stale = await tw.w.pool.query<{ n: number }>(
      `select count(*)::int as n from rollup_citation_sources where name = 'stale name'`,
    );
    expect(stale.rows[0]?.n).toBe(0);
    await expectExact('history rewritten');
  });

  it('a warehouse flagged for a rebuild is not rebuilt by a load; its views read the raw tables until the rebuild', async () => {
    await tw.w.pool.query('update rollup_state set rebuild_needed = true');
    const before = await rollups();
    const lines = [...(changed[0] ?? []), ...(original[0] ?? []).slice(5, 8), ...(original[1] ?? [])].slice(
      1,
    );
    // One answer changed, so the load queues a thread.
    const r = JSON.parse(lines[0] ?? '{}') as Record<string, string>;
    r.Response = `${r.Response} (edited)`;
    lines[0] = JSON.stringify(r);
    const id = await load(lines);
    // The load's refresh left the rollups alone; the views still agree with the raw tables, and
    // the load's thread aggregates came from the raw rows.
    expect(await rollupsCurrent(tw.w.pool)).toBe(false);
    expect(await threadTotalsFromRollups(tw.w.pool, id)).toBeNull();
    await expectThreadTotals('flagged for a rebuild', id);
    expect((await refreshRollups(tw.w.pool)).rebuilt).toBe(false);
    expect(await rollups()).toEqual(before);
    const c = await tw.w.pool.connect();
    try {
      const raw = await c.query<{ n: number }>('select count(*)::int as n from daily_usage');
      const live = await c.query<{ n: number }>(
        'select count(distinct message_date)::int as n from analytics_messages where _deleted_at is null',
      );
      expect(raw.rows[0]?.n).toBe(live.rows[0]?.n);
    } finally {
      c.release();
    }
    expect((await refreshRollups(tw.w.pool, undefined, { rebuild: true })).rebuilt).toBe(true);
    await expectExact('after the rebuild');
  });

  it('a rebuild of a range of days equals the incremental rollups', async () => {
    await refreshRollups(tw.w.pool);
    const before = await rollups();
    const steps: string[] = [];
    await rebuildRollups(tw.w.pool, { from: days[1] ?? '', to: days[1] ?? '' }, (s) => steps.push(s));
    expect(steps.length).toBeGreaterThan(0);
    expect(await rollups()).toEqual(before);
  });
});
