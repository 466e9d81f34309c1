import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { closedDayLoad, openDayLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { loadExportDay } from '../../src/ingest/source/export-day.ts';
import { createLogger } from '../../src/log.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import {
  DASHBOARD_QUERIES,
  MIXED_DASHBOARD_QUERIES,
  RAW_DASHBOARD_QUERIES,
  readSource,
  STATE_QUERY_NAMES,
} from '../../src/warehouse/read/index.ts';
import { marksWaitSql } from '../../src/warehouse/rollups/mark.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

const log = createLogger({ level: 'silent', pretty: false });

/**
 * An intraday pull's writes of its open day wait for its finalize (migration
 * 2026-11-27T13-00-00): while it loads, readers read the day from its rollups as the last pull
 * left them, never raw; its finalize releases and refreshes the day in one transaction. Real
 * loader, real Postgres, the simulator over HTTP with its clock moved by hand.
 */
describe('an intraday pull leaves its day readable as the last pull left it (simulator, Postgres)', () => {
  let sim: Simulator;
  let tw: TestWarehouse;
  let clock = 0;
  let day = '';
  let loads = 0;

  const deps = () => {
    const config = parseConfig({ ...sim.env(), CRS_BATCH_SIZE: '50', CRS_RATE_LIMIT_RPS: '1000' });
    const client = createServiceClient(
      { ...config.api, concurrency: 4, baseBackoffMs: 5, maxBackoffMs: 50, maxRetryAfterMs: 50 },
      log,
    );
    return { warehouse: tw.w, client, config, log };
  };
  const pull = () => loadExportDay(deps(), { target: openDayLoad(`pull-${++loads}`, day) });
  const range = () => ({ from: sim.truth.days()[0] ?? day, to: day });
  /**
   * Every dashboard query of the data (the ledger's state queries aside: a load changes those as
   * it runs) over the data's range, as `queries` answer it.
   */
  const answers = async (queries: typeof DASHBOARD_QUERIES) => {
    const out: Record<string, unknown> = {};
    for (const [name, q] of Object.entries(queries)) {
      if (!STATE_QUERY_NAMES.includes(name)) out[name] = await q(tw.w.pool, range());
    }
    return out;
  };
  const marks = async () => {
    const r = await tw.w.pool.query<{ dirty: string[]; waiting: string[] }>(
      `select array(select distinct day::text from rollup_dirty_days order by 1) as dirty,
              array(select distinct day::text from rollup_waiting_days order by 1) as waiting`,
    );
    return r.rows[0];
  };
  const liveRows = async () =>
    Number(
      (
        await tw.w.pool.query<{ n: string }>(
          'select count(*) as n from analytics_messages where message_date = $1 and _deleted_at is null',
          [day],
        )
      ).rows[0]?.n,
    );

  const LOCK = `select pg_advisory_lock(hashtext('crs-sync:rollups:' || current_schema()))`;
  const UNLOCK = `select pg_advisory_unlock(hashtext('crs-sync:rollups:' || current_schema()))`;
  /**
   * The session waiting for this schema's rollups' lock: a load's refresh, once it got there. Only
   * that key (a bigint lock shows as its high and low 32 bits in classid and objid): other test
   * files, run at the same time on the same database, wait on their own schemas' locks.
   */
  const refreshWaiting = async (): Promise<number> => {
    for (let i = 0; i < 1200; i++) {
      const r = await tw.w.pool.query<{ pid: number }>(
        `with k as (select hashtext('crs-sync:rollups:' || current_schema())::bigint as key)
         select l.pid from pg_locks l, k where l.locktype = 'advisory' and not l.granted and l.database =
           (select oid from pg_database where datname = current_database())
           and l.objsubid = 1 and l.objid::bigint = (k.key & 4294967295)
           and l.classid::bigint = ((k.key >> 32) & 4294967295)
         limit 1`,
      );
      if (r.rows[0]) return r.rows[0].pid;
      await new Promise((ok) => setTimeout(ok, 50));
    }
    throw new Error('the load never reached its refresh');
  };
  /**
   * Runs `load` with its finalize's refresh held: the rollups' lock (transaction.ts) is taken here
   * first, so every batch (and delete step) has committed and the refresh has not begun. Calls
   * `whileHeld` there, then kills the refresh's session (`kill`: its transaction rolls back, as
   * when the worker dies) or lets it go on; returns what the load returned or threw.
   */
  const heldAtRefresh = async (
    load: () => Promise<unknown>,
    whileHeld: () => Promise<void>,
    o: { kill: boolean },
  ): Promise<unknown> => {
    const holder = await tw.w.pool.connect();
    let outcome: Promise<unknown> | undefined;
    try {
      await holder.query(LOCK);
      outcome = load().then(
        (x) => x,
        (err: unknown) => err,
      );
      const pid = await refreshWaiting();
      await whileHeld();
      if (o.kill) await tw.w.pool.query('select pg_terminate_backend($1)', [pid]);
    } finally {
      await holder.query(UNLOCK);
      holder.release();
    }
    return outcome;
  };

  beforeAll(async () => {
    clock = Date.parse('2026-11-25T09:00:00Z');
    sim = await startSimulator({ port: 0, now: () => new Date(clock), seed: 5, days: 2, recordsPerDay: 800 });
    tw = await createTestWarehouse({ prefix: 'marks_wait' });
    day = '2026-11-25';
  });

  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
  });

  it('when a pull of the open day has committed its rows and waits for its refresh, then no day is marked, readers read the rollups and get what the last pull gave; when it dies there, the next pull releases the day exact', async () => {
    // The last finished pull of the morning.
    const first = await pull();
    expect(first.inserted).toBeGreaterThan(0);
    expect(await marks()).toEqual({ dirty: [], waiting: [] });
    expect(await readSource(tw.w.pool)).toBe('rollup');
    const before = await answers(DASHBOARD_QUERIES);
    const rowsBefore = await liveRows();

    // The afternoon's pull, held at its finalize's refresh, then killed there (a worker dying).
    clock = Date.parse('2026-11-25T18:00:00Z');
    const afternoon = await heldAtRefresh(pull, checkWhileWaiting, { kill: true });
    expect(afternoon, 'the pull died in its refresh').toBeInstanceOf(Error);
    await checkWhileWaiting();

    async function checkWhileWaiting(): Promise<void> {
      expect(await liveRows(), 'the pull committed new rows of the day').toBeGreaterThan(rowsBefore);
      // Its writes wait: no day is marked, so every reader takes the rollups, which still give
      // the morning's figures, though the raw rows moved on.
      expect(await marks()).toEqual({ dirty: [], waiting: [day] });
      // Nor is a thread: the finalize queues its threads in the refresh's transaction.
      expect(await readSource(tw.w.pool)).toBe('rollup');
      expect(await answers(DASHBOARD_QUERIES)).toEqual(before);
      const rawMid = await answers(RAW_DASHBOARD_QUERIES);
      expect(rawMid.usageDaily, 'the raw rows differ from what readers are shown').not.toEqual(
        before.usageDaily,
      );
      const view = await tw.w.pool.query('select * from daily_usage where message_date = $1', [day]);
      const viewBefore = (before.usageDaily as Array<{ day: string; messages: number }>).find(
        (d) => d.day === day,
      );
      expect(Number(view.rows[0]?.messages)).toBe(viewBefore?.messages);
    }

    // The retry (a new load of the day) reads the export so far and, in its finalize, releases
    // the day and refreshes it: current again, and the rollups are the raw rows.
    const again = await pull();
    expect(again.rowsRead).toBeGreaterThan(0);
    expect(await marks()).toEqual({ dirty: [], waiting: [] });
    expect(await readSource(tw.w.pool)).toBe('rollup');
    const raw = await answers(RAW_DASHBOARD_QUERIES);
    expect(await answers(DASHBOARD_QUERIES)).toEqual(raw);
    expect(raw.usageDaily).not.toEqual(before.usageDaily);
  });

  it("when a pull's writes wait and another write marks another day, then the mixed forms read those raw and the waiting day as the rollups hold it, and a refresh without the day leaves it waiting", async () => {
    // The closed day before, loaded whole (its own refresh).
    const other = '2026-11-24';
    const closed = await loadExportDay(deps(), { target: closedDayLoad(`closed-${++loads}`, other) });
    expect(closed.inserted).toBeGreaterThan(0);
    expect(await marks()).toEqual({ dirty: [], waiting: [] });
    const before = await answers(DASHBOARD_QUERIES);
    // A batch of a pull of the open day, as the loader commits it (merge.ts): a row changed.
    const c = await tw.w.pool.connect();
    try {
      await c.query(`begin; ${marksWaitSql(day)}`);
      await c.query(
        `update analytics_messages set response = '', response_chars = 0
          where message_id = (select message_id from analytics_messages
                               where message_date = $1 and response_chars > 0 order by message_id limit 1)`,
        [day],
      );
      await c.query('commit');
    } finally {
      c.release();
    }
    expect(await marks()).toEqual({ dirty: [], waiting: [day] });

    // Another day written without waiting (a load of it, `deletes apply`): marked.
    await tw.w.pool.query(
      `update analytics_messages set response = response || ' (edited)'
        where message_id = (select message_id from analytics_messages where message_date = $1 order by message_id limit 1)`,
      [other],
    );
    expect(await marks()).toEqual({ dirty: [other], waiting: [day] });
    expect(await readSource(tw.w.pool)).toBe('mixed');
    const mixed = await answers(MIXED_DASHBOARD_QUERIES);
    // The waiting day's figures are those of the last refresh; the others' what the rows say now.
    const dayOf = (a: Record<string, unknown>, d: string) =>
      (a.usageDaily as Array<{ day: string }>).find((x) => x.day === d);
    expect(dayOf(mixed, day)).toEqual(dayOf(before, day));
    expect(dayOf(mixed, other)).toEqual(dayOf(await answers(RAW_DASHBOARD_QUERIES), other));

    // An enrichment batch's refresh takes the marks, not what waits.
    await refreshRollups(tw.w.pool);
    expect(await marks()).toEqual({ dirty: [], waiting: [day] });
    expect(await readSource(tw.w.pool)).toBe('rollup');
    expect(dayOf(await answers(DASHBOARD_QUERIES), day)).toEqual(dayOf(before, day));

    // `crs-sync rollups refresh` releases every waiting day.
    await refreshRollups(tw.w.pool, undefined, { release: 'all' });
    expect(await marks()).toEqual({ dirty: [], waiting: [] });
    expect(await answers(DASHBOARD_QUERIES)).toEqual(await answers(RAW_DASHBOARD_QUERIES));
  });

  it('when the closed-day pull of the day loads and deletes, then its writes and deletes wait too, and readers see the last intraday pull until its refresh', async () => {
    await pull();
    const before = await answers(DASHBOARD_QUERIES);
    // After midnight: the day closed, pulled as a complete day (it may delete what the service
    // deleted since; a row of the day it no longer serves is made to go, so the step deletes).
    clock = Date.parse('2026-11-26T01:00:00Z');
    await tw.w.pool.query(
      `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input, response,
                                       extra, record_hash, _source_line, _load_id, response_chars)
       select gen_random_uuid(), thread_id, user_id, message_time, message_date, input, response, extra,
              md5('gone'), 1, 'test', response_chars
         from analytics_messages where message_date = $1 and _deleted_at is null order by message_id limit 1`,
      [day],
    );
    await refreshRollups(tw.w.pool);
    const withGone = await answers(DASHBOARD_QUERIES);
    expect(withGone).not.toEqual(before);
    const closed = (await heldAtRefresh(
      () => loadExportDay(deps(), { target: closedDayLoad(`closed-${++loads}`, day) }),
      async () => {
        expect(await marks()).toEqual({ dirty: [], waiting: [day] });
        expect(await readSource(tw.w.pool)).toBe('rollup');
        expect(await answers(DASHBOARD_QUERIES)).toEqual(withGone);
      },
      { kill: false },
    )) as { deleted: number };
    expect(closed.deleted).toBeGreaterThan(0);
    expect(await marks()).toEqual({ dirty: [], waiting: [] });
    expect(await readSource(tw.w.pool)).toBe('rollup');
    expect(await answers(DASHBOARD_QUERIES)).toEqual(await answers(RAW_DASHBOARD_QUERIES));
  });
});
