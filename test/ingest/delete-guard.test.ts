import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { closedDayLoad, fileLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { CrsError } from '../../src/errors.ts';
import { finalizeLoad } from '../../src/ingest/finalize/finalize.ts';
import { runLoad } from '../../src/ingest/merge/load.ts';
import { SeenSpill } from '../../src/ingest/merge/seen-spill.ts';
import { loadExportDay } from '../../src/ingest/source/export-day.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { cliSync } from '../helpers/cli.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The deletion safeguard against hostile exports, over real HTTP: the day is first loaded from the
 * simulator, then "exported" again by a small server that answers what a broken service or a proxy
 * in front of it might send with status 200. No such answer may delete a row.
 */

const log = createLogger({ level: 'silent', pretty: false });
const SEED = 11;

interface Answer {
  type?: string;
  body: string;
  length?: number;
}

function idOf(line: string): string {
  return (JSON.parse(line) as Record<string, string>)['Message ID']!.toLowerCase();
}

function cli(args: string[], env: Record<string, string>) {
  return cliSync(args, { env });
}

describe('deletion safeguard', () => {
  let sim: Simulator;
  let tw: TestWarehouse;
  let hostile: Server;
  let hostileUrl: string;
  let answer: Answer = { body: '' };
  let day: string;
  let lines: string[];
  let loads = 0;

  beforeAll(async () => {
    console.log(`delete-guard: simulator seed ${SEED}`);
    sim = await startSimulator({ seed: SEED, days: 4, recordsPerDay: 400, now: runningClock(PINNED) });
    tw = await createTestWarehouse();
    const days = sim.truth.days();
    day = days[days.length - 3]!;
    lines = [...sim.truth.exportDayLines(day)];
    hostile = createServer((req, res) => {
      if (!req.url?.startsWith('/v2/analytics/messages')) {
        res.writeHead(404).end();
        return;
      }
      const headers: Record<string, string | number> = {};
      if (answer.type !== undefined) headers['content-type'] = answer.type;
      if (answer.length !== undefined) headers['content-length'] = answer.length;
      res.writeHead(200, headers);
      res.end(answer.body);
    });
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    hostileUrl = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await sim?.close();
    await new Promise<void>((resolve) => (hostile ? hostile.close(() => resolve()) : resolve()));
    await tw?.dispose();
  });

  const deps = (from: 'simulator' | 'hostile', env: Record<string, string> = {}) => {
    const config = parseConfig({
      ...sim.env(),
      ...(from === 'hostile' ? { CRS_BASE_URL: hostileUrl } : {}),
      CRS_BATCH_SIZE: '100',
      CRS_RATE_LIMIT_RPS: '1000',
      // An error page is refused and the export reopened five times: 20 ms apart, doubling.
      CRS_SOURCE_REOPEN_PAUSE: '20ms',
      ...env,
    });
    const client = createServiceClient(
      { ...config.api, concurrency: 4, baseBackoffMs: 5, maxBackoffMs: 50 },
      log,
    );
    return { warehouse: tw.w, client, config, log };
  };
  const load = (from: 'simulator' | 'hostile', env: Record<string, string> = {}) =>
    loadExportDay(deps(from, env), { target: closedDayLoad(`load-${++loads}`, day) });

  const liveIds = async () =>
    new Set(
      (
        await tw.w.pool.query<{ id: string }>(
          'select message_id::text as id from analytics_messages where message_date = $1 and _deleted_at is null',
          [day],
        )
      ).rows.map((r) => r.id),
    );
  const ledger = async () =>
    (
      await tw.w.pool.query(
        `select status, export_complete, export_incomplete_reason, deletes_held, deletes_held_reason, rows_deleted
         from sync_days where day = $1`,
        [day],
      )
    ).rows[0];
  const allIds = () => new Set(lines.map(idOf));
  const resetDay = async () => {
    // Back to the simulator's whole day, every row live, nothing held.
    answer = { type: 'application/x-ndjson', body: `${lines.join('\n')}\n` };
    await load('hostile', { CRS_DELETE_GUARD: '100' });
    expect(await liveIds()).toEqual(allIds());
  };

  it('when the day is loaded from the simulator, then every record of it is live and the export was known complete', async () => {
    const s = await load('simulator');
    expect(s.incompleteReason).toBeNull();
    expect(await liveIds()).toEqual(allIds());
    expect(await ledger()).toMatchObject({ status: 'complete', export_complete: true, deletes_held: 0 });
  });

  it("when the simulator's export ends early but cleanly (every truncate variant), then no row the service still holds is deleted", async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const config = parseConfig({ ...sim.env(), CRS_BATCH_SIZE: '100', CRS_RATE_LIMIT_RPS: '1000' });
      const client = createServiceClient(
        {
          ...config.api,
          concurrency: 4,
          baseBackoffMs: 5,
          maxBackoffMs: 50,
          extraHeaders: { 'x-sim-faults': 'truncate=1' },
        },
        log,
      );
      const s = await loadExportDay(
        { warehouse: tw.w, client, config, log },
        { target: closedDayLoad(`trunc-${i}`, day) },
      );
      // Either not known complete, or complete but past the guard (a clean truncation loses >= 20%).
      expect(s.deleted).toBe(0);
      expect(s.incompleteReason !== null || (s.deletesHeld ?? 0) > 0).toBe(true);
      seen.add(s.incompleteReason?.replace(/".*"/, '"…"').replace(/\d+/g, 'N') ?? 'held');
      expect(await liveIds()).toEqual(allIds());
    }
    console.log(`delete-guard: truncate outcomes seen (seed ${SEED}): ${[...seen].join('; ')}`);
    expect(sim.faultCounts().truncate ?? 0).toBeGreaterThanOrEqual(8);
    expect(seen.size).toBeGreaterThan(1);
  });

  const notExports: [string, () => Answer, RegExp][] = [
    [
      'an HTML page',
      () => ({ type: 'text/html; charset=utf-8', body: '<html><body><h1>Maintenance</h1></body></html>\n' }),
      /content type "text\/html"/,
    ],
    [
      'a JSON error document',
      () => ({ type: 'application/json', body: '{"error":"internal","message":"try again later"}\n' }),
      /content type "application\/json"/,
    ],
  ];
  for (const [what, make, why] of notExports) {
    it(`when a 200 answer is ${what}, then the load fails retryably, reading nothing of it: no row deleted, nothing quarantined`, async () => {
      answer = make();
      const before = await liveIds();
      const rejectsBefore = (await tw.w.pool.query('select count(*)::int n from rejected_records')).rows[0].n;
      // The guard is off: only the content-type check stands between this answer and the rows.
      const err = await load('hostile', { CRS_DELETE_GUARD: '100' }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'EXPORT_NOT_JSONL', retryable: true });
      expect(String((err as Error).message)).toMatch(why);
      expect(await liveIds()).toEqual(before);
      expect((await tw.w.pool.query('select count(*)::int n from rejected_records')).rows[0].n).toBe(
        rejectsBefore,
      );
      const l = await ledger();
      expect(l).toMatchObject({ status: 'failed' });
    });
  }

  const hostileAnswers: [string, () => Answer, RegExp][] = [
    ['an empty body', () => ({ type: 'application/x-ndjson', body: '' }), /empty body/],
    [
      'the first half of the lines, cut at a line boundary without the final newline',
      () => ({ type: 'application/x-ndjson', body: lines.slice(0, Math.floor(lines.length / 2)).join('\n') }),
      /no final newline/,
    ],
    ['no content type', () => ({ body: `${lines.slice(0, 10).join('\n')}\n` }), /no content type/],
  ];
  for (const [what, make, why] of hostileAnswers) {
    it(`when a 200 answer is ${what}, then no row of the day is deleted and the day says why`, async () => {
      answer = make();
      const before = await liveIds();
      // The guard is off: only the completeness check stands between this answer and the rows.
      const s = await load('hostile', { CRS_DELETE_GUARD: '100' });
      expect(s.deleted).toBe(0);
      expect(s.incompleteReason).toMatch(why);
      expect(await liveIds()).toEqual(before);
      const l = await ledger();
      expect(l).toMatchObject({ status: 'complete', export_complete: false, rows_deleted: 0 });
      expect(l.export_incomplete_reason).toMatch(why);
      const st = cli(['status', '--json'], { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema });
      expect(st.code).toBe(0);
      expect(JSON.parse(st.stdout).incompleteExports).toContainEqual(
        expect.objectContaining({ day, reason: expect.stringMatching(why) }),
      );
    });
  }

  it('when a complete export would delete half of the day, then the deletes are held, shown, and applied only by the command', async () => {
    await resetDay();
    const kept = lines.filter((_, i) => i % 2 === 0);
    const gone = new Set(lines.filter((_, i) => i % 2 === 1).map(idOf));
    answer = { type: 'application/x-ndjson', body: `${kept.join('\n')}\n` };
    const s = await load('hostile');
    expect(s).toMatchObject({ deleted: 0, deletesHeld: gone.size, incompleteReason: null });
    expect(await liveIds()).toEqual(allIds());
    const l = await ledger();
    expect(l).toMatchObject({ status: 'complete', export_complete: true, deletes_held: gone.size });
    expect(l.deletes_held_reason).toMatch(/more than CRS_DELETE_GUARD=10%/);
    const held = await tw.w.pool.query<{ id: string }>(
      'select message_id::text as id from held_deletes where day = $1',
      [day],
    );
    expect(new Set(held.rows.map((r) => r.id))).toEqual(gone);
    const [health] = (await tw.w.pool.query('select * from sync_health')).rows;
    expect(health).toMatchObject({ held_deletes: gone.size, held_delete_days: 1 });

    const env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema };
    const st = cli(['status'], env);
    expect(st.code).toBe(0);
    expect(st.stdout).toContain('Held deletes');
    expect(st.stdout).toContain(day);
    const stJson = JSON.parse(cli(['status', '--json'], env).stdout);
    expect(stJson.heldDeletes).toEqual([
      expect.objectContaining({ day, held: gone.size, applicable: gone.size, live: lines.length }),
    ]);
    const list = JSON.parse(cli(['deletes', 'list', '--day', day, '--ids', '--json'], env).stdout);
    expect(new Set(list.ids)).toEqual(gone);
    expect(cli(['deletes', 'apply'], env).code).toBe(2);

    const applied = cli(['deletes', 'apply', '--day', day, '--json'], env);
    expect(applied.code).toBe(0);
    expect(JSON.parse(applied.stdout).applied).toEqual([
      { day, held: gone.size, deleted: gone.size, skipped: 0, notApplied: null },
    ]);
    expect(await liveIds()).toEqual(new Set(kept.map(idOf)));
    expect(await ledger()).toMatchObject({
      deletes_held: 0,
      deletes_held_reason: null,
      rows_deleted: gone.size,
    });
    expect((await tw.w.pool.query('select count(*)::int n from held_deletes')).rows[0].n).toBe(0);
    // The rollups were refreshed by the command: nothing left marked, and the day's count is the live rows'.
    const marked = await tw.w.pool.query('select count(*)::int n from rollup_dirty_days');
    expect(marked.rows[0].n).toBe(0);
    const daily = await tw.w.pool.query('select messages::int n from rollup_daily where message_date = $1', [
      day,
    ]);
    expect(daily.rows[0].n).toBe(kept.length);

    // The same export again: nothing left to delete or hold, nothing written.
    const again = await load('hostile');
    expect(again).toMatchObject({
      deleted: 0,
      deletesHeld: 0,
      inserted: 0,
      updated: 0,
      unchanged: kept.length,
    });
    expect(await liveIds()).toEqual(new Set(kept.map(idOf)));
    expect(await ledger()).toMatchObject({ deletes_held: 0, export_complete: true });
  });

  it('when a later complete export within the guard follows held deletes, then it replaces the held set', async () => {
    await resetDay();
    const half = Math.floor(lines.length / 2);
    answer = { type: 'application/x-ndjson', body: `${lines.slice(0, half).join('\n')}\n` };
    expect((await load('hostile')).deletesHeld).toBe(lines.length - half);
    const dropped = lines.slice(-3).map(idOf);
    answer = { type: 'application/x-ndjson', body: `${lines.slice(0, -3).join('\n')}\n` };
    const s = await load('hostile');
    expect(s).toMatchObject({ deleted: 3, deletesHeld: 0 });
    expect((await tw.w.pool.query('select count(*)::int n from held_deletes')).rows[0].n).toBe(0);
    const live = await liveIds();
    expect(live.size).toBe(lines.length - 3);
    for (const id of dropped) expect(live.has(id)).toBe(false);
  });

  it('when a line of the day is quarantined, then its row is not deleted while absent rows are', async () => {
    await resetDay();
    const bad = lines[5]!;
    // Still names its message id, but its time is not a time: the record is rejected.
    const broken = bad.replace(/"Message Time"\s*:\s*"[^"]*"/, '"Message Time":"not a time"');
    expect(broken).not.toBe(bad);
    const absent = idOf(lines[7]!);
    const served = lines.map((l, i) => (i === 5 ? broken : l)).filter((_, i) => i !== 7);
    answer = { type: 'application/x-ndjson', body: `${served.join('\n')}\n` };
    const s = await load('hostile');
    expect(s).toMatchObject({ rejected: 1, deleted: 1, deletesHeld: 0 });
    const live = await liveIds();
    expect(live.has(idOf(bad))).toBe(true);
    expect(live.has(absent)).toBe(false);
    expect(live.size).toBe(lines.length - 1);
  });

  it('when the seen ids spill over many chunks, then the table holds exactly the ids reported', async () => {
    const spill = new SeenSpill(tw.w.pool, 'spill-test', 1000);
    await spill.reset();
    const ids = [...allIds()];
    const expected = new Set<string>();
    // Upper-case ids too: the parser accepts them and stores them lower-case.
    for (let round = 0; round < 30; round++) {
      for (const id of ids) {
        const v = `${id.slice(0, 24)}${(round * 7919 + ids.indexOf(id)).toString(16).padStart(12, '0')}`;
        spill.add(round % 2 === 0 ? v : v.toUpperCase());
        expected.add(v);
        if (spill.backlogged) await spill.room();
      }
    }
    await spill.finish();
    const r = await tw.w.pool.query<{ id: string }>(
      "select distinct message_id::text as id from load_seen where load_key = 'spill-test'",
    );
    expect(r.rows.length).toBe(expected.size);
    expect(new Set(r.rows.map((x) => x.id))).toEqual(expected);
    await spill.reset();
    expect(
      (await tw.w.pool.query("select count(*)::int n from load_seen where load_key = 'spill-test'")).rows[0]
        .n,
    ).toBe(0);
  });

  it('when a load is done, then its spilled ids are gone from load_seen', async () => {
    expect((await tw.w.pool.query('select count(*)::int n from load_seen')).rows[0].n).toBe(0);
  });
});

describe('seen ids over a failed and a resumed attempt', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse();
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when an attempt fails part way and the next resumes from its checkpoint, then exactly the rows missing from the source are deleted', async () => {
    const day = '2026-10-12';
    const recs = makeRecords(400, { day, seed: 'resume-del' });
    const load = (loadId: string, records: unknown[], failAfterBytes?: number) =>
      runLoad({
        warehouse: tw.w,
        log,
        target: fileLoad(loadId, loadId, { from: day, to: day }),
        open: async () => {
          const bytes = Buffer.from(toJsonl(records));
          return (async function* () {
            if (failAfterBytes === undefined) {
              yield bytes;
              return;
            }
            yield bytes.subarray(0, failAfterBytes);
            throw new CrsError('INPUT_UNREADABLE', 'the source failed part way');
          })();
        },
        batchSize: 10,
        parts: 2,
        maxLineBytes: 1 << 20,
        maxReopens: 0,
        deleteGuardPct: 100,
      });
    await load('first', recs);
    // Every 20th record leaves the source; the first attempt dies after ~60% of it, its batches
    // up to there committed, so the second attempt skips them but must still count their ids.
    const kept = recs.filter((_, i) => i % 20 !== 7);
    const gone = recs.filter((_, i) => i % 20 === 7).map((r) => r['Message ID']);
    const size = Buffer.byteLength(toJsonl(kept));
    await expect(load('second', kept, Math.floor(size * 0.6))).rejects.toThrow(/failed part way/);
    const committed = await tw.w.pool.query<{ n: number }>(
      "select min(lines_committed)::int as n from load_checkpoints where load_key = 'second'",
    );
    expect(committed.rows[0]!.n).toBeGreaterThan(0);
    expect((await tw.w.pool.query('select count(*)::int n from load_seen')).rows[0].n).toBe(0);

    const s = await load('second', kept);
    expect(s.resumed).toBe(true);
    expect(s.deleted).toBe(gone.length);
    const dead = await tw.w.pool.query<{ id: string }>(
      'select message_id::text as id from analytics_messages where _deleted_at is not null order by 1',
    );
    expect(dead.rows.map((r) => r.id)).toEqual([...gone].sort());
    expect((await tw.w.pool.query('select count(*)::int n from load_seen')).rows[0].n).toBe(0);
  });

  it('when the spilled ids are lost before the delete step (an unlogged table after a crash), then nothing is deleted and the load fails retryably', async () => {
    const day = '2026-10-13';
    const recs = makeRecords(50, { day, seed: 'lost-seen' });
    const imported = await runLoad({
      warehouse: tw.w,
      log,
      target: fileLoad('lost-1', 'lost-1', { from: day, to: day }),
      open: async () =>
        (async function* () {
          yield Buffer.from(toJsonl(recs));
        })(),
      batchSize: 10,
      parts: 2,
      maxLineBytes: 1 << 20,
      deleteGuardPct: 100,
    });
    expect(imported.inserted).toBe(50);
    // The delete step of a load that spilled 50 ids, none of which is left in load_seen.
    const err = await finalizeLoad(tw.w, {
      target: fileLoad('lost-2', 'lost-2', { from: day, to: day }),
      seen: true,
      seenCount: 50,
      bytes: 0,
      deleteGuardPct: 100,
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'DB_UNAVAILABLE', retryable: true });
    const live = await tw.w.pool.query<{ n: number }>(
      'select count(*)::int n from analytics_messages where message_date = $1 and _deleted_at is null',
      [day],
    );
    expect(live.rows[0]!.n).toBe(50);
  });
});

describe('a file import with declared complete days', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse();
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when the file does not end with a newline, then no row of its days is deleted and the day says why', async () => {
    const day = '2026-10-14';
    const recs = makeRecords(50, { day, seed: 'import-cut' });
    const dir = mkdtempSync(path.join(tmpdir(), 'crs-guard-'));
    const config = parseConfig({ CRS_BATCH_SIZE: '10', CRS_DELETE_GUARD: '100' });
    const window = { wholeDays: { from: day, to: day } };
    const whole = path.join(dir, 'whole.jsonl');
    writeFileSync(whole, toJsonl(recs));
    await importFile(tw.w, config, log, { file: whole, ...window });
    const cut = path.join(dir, 'cut.jsonl');
    writeFileSync(cut, toJsonl(recs.slice(0, 20)).trimEnd());
    const s = await importFile(tw.w, config, log, { file: cut, ...window });
    expect(s.deleted).toBe(0);
    const live = await tw.w.pool.query(
      'select count(*)::int n from analytics_messages where _deleted_at is null',
    );
    expect(live.rows[0].n).toBe(50);
    const l = await tw.w.pool.query(
      'select export_complete, export_incomplete_reason from sync_days where day = $1',
      [day],
    );
    expect(l.rows[0]).toEqual({
      export_complete: false,
      export_incomplete_reason: 'the input does not end with a newline (it may be cut)',
    });
    // The same lines with their final newline: a whole file, whose missing rows are deleted.
    writeFileSync(cut, toJsonl(recs.slice(0, 20)));
    expect((await importFile(tw.w, config, log, { file: cut, ...window })).deleted).toBe(30);
  });
});

describe('held deletes and the loads around them', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse();
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  const load = (
    loadId: string,
    lines: unknown[],
    wholeDays: { from: string; to: string } | null,
    open?: () => AsyncIterable<Uint8Array>,
  ) =>
    runLoad({
      warehouse: tw.w,
      log,
      target: fileLoad(loadId, loadId, wholeDays),
      open: async () =>
        open?.() ??
        (async function* () {
          yield Buffer.from(toJsonl(lines));
        })(),
      batchSize: 10,
      parts: 2,
      maxLineBytes: 1 << 20,
    });
  const liveOf = async (day: string) =>
    Number(
      (
        await tw.w.pool.query(
          'select count(*) n from analytics_messages where message_date = $1 and _deleted_at is null',
          [day],
        )
      ).rows[0].n,
    );
  const dayRow = async (day: string) =>
    (
      await tw.w.pool.query(
        'select deletes_held, deletes_held_reason, deletes_force_reason from sync_days where day = $1',
        [day],
      )
    ).rows[0];

  it('when a complete load quarantines a line of its day whose id cannot be read, then its deletes are held, not applied, and need --force', async () => {
    const day = '2026-09-01';
    const recs = makeRecords(100, { day, seed: 'unreadable-complete' });
    await load('uc-1', recs, { from: day, to: day });
    // One row missing (1 %, under the guard), and a line whose id is a number.
    const lines = [...recs.slice(0, 99), `{"Message ID": 12, "Message Time": "${day}T01:00:00Z"}`];
    const s = await load('uc-2', lines, { from: day, to: day });
    expect(s).toMatchObject({ deleted: 0, rejected: 1 });
    expect(s.days.find((d) => d.day === day)?.deletesHeld).toBe(1);
    expect(await liveOf(day)).toBe(100);
    const row = await dayRow(day);
    expect(Number(row.deletes_held)).toBe(1);
    expect(row.deletes_held_reason).toMatch(/cannot be read/);
    expect(row.deletes_force_reason).toMatch(/cannot be read/);
  });

  it("when a load's deletes over its complete days pass CRS_DELETE_GUARD_LOAD while every day stays under CRS_DELETE_GUARD, then every day's deletes are held with the load's reason", async () => {
    const days = ['2026-09-02', '2026-09-03', '2026-09-04'];
    const recs = days.flatMap((day) => makeRecords(100, { day, seed: `whole-${day}` }));
    await load('wg-1', recs, { from: days[0]!, to: days[2]! });
    // Every day loses 5 of its 100 rows (5 %, under the per-day 10 %): 15 of 300 over the load,
    // more than the load's 2 %.
    const kept = recs.filter((_, i) => i % 100 >= 5);
    const s = await load('wg-2', kept, { from: days[0]!, to: days[2]! });
    expect(s.deleted).toBe(0);
    expect(s.days.map((d) => [d.day, d.deletesHeld])).toEqual([
      [days[0], 5],
      [days[1], 5],
      [days[2], 5],
    ]);
    for (const day of days) expect(await liveOf(day)).toBe(100);
    expect((await dayRow(days[1]!)).deletes_held_reason).toMatch(
      /over its 3 complete days, 15 of 300 live rows \(5%\).*CRS_DELETE_GUARD_LOAD=2%/,
    );
  });

  it("when a multi-day load's deletes stay under CRS_DELETE_GUARD_LOAD, then they are applied", async () => {
    const days = ['2026-09-12', '2026-09-13', '2026-09-14'];
    const recs = days.flatMap((day) => makeRecords(100, { day, seed: `under-${day}` }));
    await load('wu-1', recs, { from: days[0]!, to: days[2]! });
    // One row of each day: 3 of 300 (1 %).
    const kept = recs.filter((_, i) => i % 100 !== 0);
    const s = await load('wu-2', kept, { from: days[0]!, to: days[2]! });
    expect(s.deleted).toBe(3);
    for (const day of days) expect(await liveOf(day)).toBe(99);
  });

  it("when loads were killed with ids in load_seen, then the next load removes theirs and keeps a running one's", async () => {
    const ids = makeRecords(3, { seed: 'dead' }).map((r) => r['Message ID']);
    await tw.w.pool.query(
      `insert into load_seen (load_key, message_id) select k, id::uuid from unnest($1::text[]) k, unnest($2::text[]) id`,
      [['killed-a', 'killed-b', 'running'], ids],
    );
    // A load still running holds its lock on a session of its own.
    const running = await tw.w.pool.connect();
    try {
      await running.query('select pg_advisory_lock(hashtext($1))', [`crs-sync:load:${tw.schema}:running`]);
      const day = '2026-09-05';
      await load('cleaner', makeRecords(5, { day, seed: 'cleaner' }), null);
      const left = await tw.w.pool.query(
        'select load_key, count(*)::int n from load_seen group by load_key order by 1',
      );
      expect(left.rows).toEqual([{ load_key: 'running', n: 3 }]);
      // The load keys are listed from an index, not by reading every id.
      const idx = await tw.w.pool.query(
        "select indexdef from pg_indexes where schemaname = $1 and tablename = 'load_seen'",
        [`${tw.schema}_internal`],
      );
      expect(idx.rows.map((r) => r.indexdef).join()).toMatch(/\(load_key, message_id\)/);
    } finally {
      await running.query('select pg_advisory_unlock_all()');
      running.release();
    }
  });

  it('when a load that began with nothing held reads rows of a day whose deletes another load held meanwhile, then that day needs --force', async () => {
    const day = '2026-09-06';
    const recs = makeRecords(100, { day, seed: 'overlap' });
    await load('ov-1', recs, { from: day, to: day });
    // Nothing held anywhere when the overlapping load starts (the earlier tests' holds dropped).
    await tw.w.pool.query('delete from held_deletes');
    // The overlapping load reads its first lines, then waits while the other load holds deletes.
    let go!: () => void;
    const wait = new Promise<void>((r) => {
      go = r;
    });
    let started!: () => void;
    const reading = new Promise<void>((r) => {
      started = r;
    });
    const overlapping = load('ov-slow', [], null, async function* () {
      yield Buffer.from(toJsonl(recs.slice(0, 30)));
      started();
      await wait;
      yield Buffer.from(toJsonl(recs.slice(30, 60)));
    });
    await reading;
    const held = await load('ov-2', recs.slice(0, 50), { from: day, to: day });
    expect(held.days[0]?.deletesHeld).toBe(50);
    go();
    await overlapping;
    // Its ids were not noted: which held rows it read is unknown, so apply must be forced.
    const row = await dayRow(day);
    expect(Number(row.deletes_held)).toBe(50);
    expect(row.deletes_force_reason).toMatch(
      /ov-slow read rows of this day while its deletes were being held/,
    );
  });
});
