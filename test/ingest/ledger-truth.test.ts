import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { STALE_AFTER_MS } from '../../src/common/activity-timeouts.ts';
import { closedDayLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { loadExportDay } from '../../src/ingest/source/export-day.ts';
import { createLogger } from '../../src/log.ts';
import { generateExportLines } from '../../src/simulator/index.ts';
import { startRun, touchRun } from '../../src/warehouse/ledger.ts';
import { readStatus } from '../../src/warehouse/read/status.ts';
import { planWindow } from '../../src/warehouse/sync-window.ts';
import { client, SECRETS } from '../api/helpers/client-setup.ts';
import { type ScriptedServer, startScriptedServer } from '../api/helpers/scripted-server.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The ledger stays true when work is retried or dies: counters after a retried finalize equal a
 * single clean run's, and runs or days left `running` by a load that is gone are shown as
 * abandoned and taken over.
 */

const log = createLogger({ level: 'silent', pretty: false });
const SEED = 99;

let tw: TestWarehouse;
let server: ScriptedServer | undefined;

beforeAll(async () => {
  tw = await createTestWarehouse();
  console.log(`ledger-truth: simulator seed ${SEED}`);
});
afterAll(async () => {
  await tw?.dispose();
});
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** Serves `lines` as the export of every request (a complete JSONL answer). */
async function serveExport(lines: () => string[]): Promise<ScriptedServer> {
  return startScriptedServer((_req, res) => {
    const body = Buffer.from(`${lines().join('\n')}\n`);
    res.writeHead(200, { 'content-type': 'application/x-ndjson', 'content-length': String(body.length) });
    res.end(body);
  });
}

function deps(url: string) {
  const config = parseConfig({
    CRS_BASE_URL: url,
    CRS_SERVICE_ACCOUNT_TOKEN: SECRETS.serviceAccountToken,
    CRS_BATCH_SIZE: '50',
    CRS_LOAD_PARTITIONS: '2',
  });
  return { warehouse: tw.w, client: client(url).api, config, log };
}

const COUNTERS = [
  'status',
  'rows_read',
  'rows_inserted',
  'rows_updated',
  'rows_unchanged',
  'rows_rejected',
  'rows_deleted',
  'bytes',
  'lines_committed',
  '_load_id',
] as const;

async function dayRow(day: string) {
  const r = await tw.w.db
    .selectFrom('sync_days')
    .selectAll()
    .where('day', '=', day)
    .executeTakeFirstOrThrow();
  const counters = Object.fromEntries(COUNTERS.map((k) => [k, r[k]])) as Pick<
    typeof r,
    (typeof COUNTERS)[number]
  >;
  return { ...counters, attempts: r.attempts };
}

describe('counters through a retried finalize', () => {
  it('when a load that deleted rows is run again under its load id (its finalize retried after it committed), then every counter of the day equals the single clean run', async () => {
    const day = '2026-11-18';
    const all = [...generateExportLines({ seed: SEED, day, recordsPerDay: 400 })];
    let served = all;
    server = await serveExport(() => served);
    const d = deps(server.url);
    await loadExportDay(d, { target: closedDayLoad('first', day) });

    // The next export lacks a few records (under the delete guard's share): they are deleted.
    served = all.filter((_, i) => i % 50 !== 3);
    const gone = all.length - served.length;
    const clean = await loadExportDay(d, { target: closedDayLoad('second', day) });
    expect(clean.deleted).toBe(gone);
    const afterClean = await dayRow(day);
    expect(afterClean.rows_deleted).toBe(gone);

    // Temporal retries an attempt whose result was lost (worker killed after the finalize
    // committed): the same load id resumes from its checkpoint and finalizes again.
    const retried = await loadExportDay(d, { target: closedDayLoad('second', day) });
    const afterRetry = await dayRow(day);
    expect({ ...afterRetry, attempts: 0 }).toEqual({ ...afterClean, attempts: 0 });
    expect(afterRetry.attempts).toBe(afterClean.attempts + 1);
    expect(retried.deleted).toBe(gone);
    expect(retried.inserted).toBe(clean.inserted);
    expect(retried.unchanged).toBe(clean.unchanged);

    // A new load of the unchanged export deletes nothing more, and says so; the day's ledger
    // still counts the rows deleted before (rows_deleted is the day's, not the last load's).
    const third = await loadExportDay(d, { target: closedDayLoad('third', day) });
    expect(third.deleted).toBe(0);
    expect((await dayRow(day)).rows_deleted).toBe(gone);
    const live = await tw.w.pool.query<{ n: string }>(
      'select count(*) as n from analytics_messages where message_date = $1 and _deleted_at is null',
      [day],
    );
    expect(Number(live.rows[0]!.n)).toBe(served.length);
  });
});

describe('runs and days left running by a load that is gone', () => {
  const stale = `${Math.ceil((STALE_AFTER_MS * 2) / 1000)} seconds`;

  it('when a run shows no sign of life past the threshold, then status shows it abandoned and the next run marks it so, while a live run is left alone', async () => {
    await startRun(tw.w.db, { runId: 'dead-run', kind: 'manual', workflowId: 'wf-dead' });
    await startRun(tw.w.db, { runId: 'live-run', kind: 'manual', workflowId: 'wf-live' });
    await tw.w.pool.query(
      `update sync_runs set progress_at = now() - $1::interval where load_id = 'dead-run'`,
      [stale],
    );

    const s = await readStatus(tw.w.db);
    const byId = new Map(s.recentRuns.map((r) => [r.loadId, r]));
    expect(byId.get('dead-run')?.status).toBe('abandoned');
    expect(byId.get('live-run')?.status).toBe('running');
    expect(s.staleAfterMinutes).toBe(STALE_AFTER_MS / 60_000);

    const { abandoned } = await startRun(tw.w.db, { runId: 'next-run', kind: 'scheduled' });
    expect(abandoned).toEqual(['dead-run']);
    const rows = await tw.w.db
      .selectFrom('sync_runs')
      .select(['load_id', 'status', 'error', 'finished_at'])
      .where('load_id', 'in', ['dead-run', 'live-run'])
      .orderBy('load_id')
      .execute();
    expect(rows.map((r) => [r.load_id, r.status])).toEqual([
      ['dead-run', 'abandoned'],
      ['live-run', 'running'],
    ]);
    expect(rows[0]!.error).toContain('marked abandoned by run next-run');
    expect(rows[0]!.finished_at).not.toBeNull();

    // A run taken for dead that shows a sign of life after all is running again.
    await touchRun(tw.w.db, 'dead-run');
    const back = await tw.w.db
      .selectFrom('sync_runs')
      .select(['status', 'error', 'finished_at'])
      .where('load_id', '=', 'dead-run')
      .executeTakeFirstOrThrow();
    expect(back).toEqual({ status: 'running', error: null, finished_at: null });
  });

  it('when a batch commit of an import is recent though its progress_at is old, then the run is alive', async () => {
    await startRun(tw.w.db, { runId: 'import-busy', kind: 'import' });
    await tw.w.pool.query(
      `update sync_runs set progress_at = now() - $1::interval where load_id = 'import-busy'`,
      [stale],
    );
    await tw.w.pool.query(
      `insert into load_checkpoints (load_key, part, parts, updated_at) values ('import-busy', 0, 1, now())`,
    );
    const s = await readStatus(tw.w.db);
    expect(s.recentRuns.find((r) => r.loadId === 'import-busy')?.status).toBe('running');
    const { abandoned } = await startRun(tw.w.db, { runId: 'another', kind: 'manual' });
    expect(abandoned).not.toContain('import-busy');
  });

  it('when a day is left running by a load that is gone, then status shows it abandoned and the next load of the day takes it over, counting an attempt', async () => {
    const day = '2026-11-16';
    const lines = [...generateExportLines({ seed: SEED, day, recordsPerDay: 120 })];
    server = await serveExport(() => lines);
    const d = deps(server.url);
    // A load that was terminated mid-day: the day reads running, its last sign of life long ago.
    await tw.w.pool.query(
      `insert into sync_days (day, status, _load_id, started_at, attempts, progress_at)
       values ($1, 'running', 'terminated-load', now() - $2::interval, 3, now() - $2::interval)`,
      [day, stale],
    );
    const s = await readStatus(tw.w.db);
    expect(s.days.abandoned).toBe(1);
    expect(s.days.running ?? 0).toBe(0);
    expect(s.abandonedDays.map((a) => [a.day, a.loadId, a.attempts])).toEqual([[day, 'terminated-load', 3]]);

    const summary = await loadExportDay(d, { target: closedDayLoad('taking-over', day) });
    expect(summary.rowsRead).toBe(lines.length);
    const row = await tw.w.db
      .selectFrom('sync_days')
      .selectAll()
      .where('day', '=', day)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('complete');
    expect(row.attempts).toBe(4);
    expect(row.taken_over_from).toBe('terminated-load');
    expect((await readStatus(tw.w.db)).abandonedDays).toEqual([]);

    // A retry of the same load is not a takeover; a later load that found the day closed neither.
    await loadExportDay(d, { target: closedDayLoad('later', day) });
    const later = await tw.w.db
      .selectFrom('sync_days')
      .selectAll()
      .where('day', '=', day)
      .executeTakeFirstOrThrow();
    expect(later.taken_over_from).toBeNull();
    expect(later.attempts).toBe(5);
  });

  it('when a day load is running and showed a sign of life lately, then it is shown running, not abandoned', async () => {
    const day = '2026-11-15';
    await tw.w.pool.query(
      `insert into sync_days (day, status, _load_id, started_at, attempts, progress_at)
       values ($1, 'running', 'busy-load', now() - $2::interval, 1, now() - $2::interval)`,
      [day, stale],
    );
    await touchRun(tw.w.db, 'busy-load', day);
    const s = await readStatus(tw.w.db);
    expect(s.abandonedDays.map((a) => a.day)).not.toContain(day);
    expect(s.days.running).toBe(1);
  });
});

describe('crs-sync status', () => {
  it('when a run and a day were left running by loads that are gone, then status shows both abandoned, as text and as JSON', async () => {
    const stale = `${Math.ceil((STALE_AFTER_MS * 2) / 1000)} seconds`;
    await startRun(tw.w.db, { runId: 'cli-dead-run', kind: 'backfill', workflowId: 'wf-cli' });
    await tw.w.pool.query(
      `update sync_runs set progress_at = now() - $1::interval where load_id = 'cli-dead-run'`,
      [stale],
    );
    await tw.w.pool.query(
      `insert into sync_days (day, status, _load_id, started_at, attempts, progress_at)
       values ('2026-11-10', 'running', 'cli-dead-run', now() - $1::interval, 2, now() - $1::interval)`,
      [stale],
    );
    const root = path.resolve(import.meta.dirname, '..', '..');
    const cli = (args: string[]) =>
      spawnSync(process.execPath, [path.join(root, 'bin/crs-sync.js'), ...args], {
        env: { ...process.env, LOG_LEVEL: 'silent', DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema },
        encoding: 'utf8',
      });

    const json = cli(['status', '--json']);
    expect(json.status).toBe(0);
    const s = JSON.parse(json.stdout);
    expect(s.recentRuns.find((r: { loadId: string }) => r.loadId === 'cli-dead-run').status).toBe(
      'abandoned',
    );
    expect(s.abandonedDays).toContainEqual(
      expect.objectContaining({ day: '2026-11-10', loadId: 'cli-dead-run' }),
    );
    expect(s.days.abandoned).toBeGreaterThanOrEqual(1);

    // The BI view counts them too.
    const [health] = (await tw.w.pool.query('select abandoned_days, abandoned_runs from sync_health')).rows;
    expect(Number(health.abandoned_days)).toBeGreaterThanOrEqual(1);
    expect(Number(health.abandoned_runs)).toBeGreaterThanOrEqual(1);

    const text = cli(['status']);
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(/Abandoned days/);
    expect(text.stdout).toMatch(/2026-11-10\s+\S*\s*cli-dead-run/);
    expect(text.stdout).toMatch(/cli-dead-run\s+\S*\s*backfill\s+\S*\s*abandoned/);
  });
});

describe('planning a scheduled sync', () => {
  it('when a recent day loaded from an export not known complete, then the next scheduled window reaches back to it, and a month-old one is left to the operator', async () => {
    const db = tw.w.db;
    await db.deleteFrom('sync_days').execute();
    const day = (d: number) => `2026-03-${String(d).padStart(2, '0')}`;
    const rows = [];
    for (let d = 1; d <= 20; d++)
      rows.push({ day: day(d), status: 'complete' as const, export_complete: true });
    await db.insertInto('sync_days').values(rows).execute();
    const now = new Date('2026-03-21T06:00:00Z');
    const clean = await planWindow(db, { lookbackDays: 2, now });
    expect(clean).toMatchObject({ from: day(19), to: day(20) });

    // An HTML page with status 200 on the 12th: the day loaded nothing and deleted nothing.
    await db
      .updateTable('sync_days')
      .set({ export_complete: false, export_incomplete_reason: 'content type text/html is not an export' })
      .where('day', '=', day(12))
      .execute();
    const plan = await planWindow(db, { lookbackDays: 2, now });
    expect(plan.from).toBe(day(12));
    expect(plan.days).toHaveLength(9);

    // Beyond the re-pull reach, the day stays where status shows it.
    const monthLater = new Date('2026-04-13T06:00:00Z');
    const late = await planWindow(db, { lookbackDays: 2, now: monthLater });
    expect(late.from > day(12)).toBe(true);
    await db.deleteFrom('sync_days').execute();
  });
});
