import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toFailure } from '../../activities/failures.ts';
import { fileLoad } from '../../src/common/load-target.ts';
import { CrsError } from '../../src/errors.ts';
import { runLoad } from '../../src/ingest/merge/load.ts';
import { createLogger } from '../../src/log.ts';
import { checkConnection, type DbTimeouts, openWarehouse, type Warehouse } from '../../src/warehouse/db.ts';
import { dbFailureKind } from '../../src/warehouse/db-errors.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { messageRows } from '../helpers/load-files.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Database faults against the real PostgreSQL: backends terminated under a running load (what a
 * failover or restart does), statements and lock waits cut by the configured timeouts. An
 * unhandled 'error' of a pg client would kill this test process (vitest reports it and the file
 * fails), so each test passing also shows that no fault reached the process.
 */

const LINES = 4000;
const DATA = Buffer.from(
  toJsonl([
    ...makeRecords(LINES / 2, { seed: 'dbfault', threads: 30 }),
    '{"broken": ',
    ...makeRecords(LINES / 2 - 1, { seed: 'dbfault-2', threads: 30 }),
  ]),
);

/** Log lines of a warehouse's pool, to see what an operator sees. */
function captureLog() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l));
      done();
    },
  });
  return { lines, log: createLogger({ level: 'warn', pretty: false, destination }) };
}

/** The export in 16 kB chunks; once past `pauseAtByte`, waits for `pause` before the rest. */
async function* chunks(pauseAtByte = Number.POSITIVE_INFINITY, pause?: () => Promise<void>) {
  let paused = false;
  for (let at = 0; at < DATA.length; at += 16_384) {
    if (!paused && at >= pauseAtByte && pause) {
      paused = true;
      await pause();
    }
    yield DATA.subarray(at, Math.min(DATA.length, at + 16_384));
  }
}

function load(w: Warehouse, loadId: string, source: () => AsyncIterable<Uint8Array>) {
  return runLoad({
    warehouse: w,
    log: createLogger({ level: 'silent', pretty: false }),
    target: fileLoad(loadId, 'db-faults.jsonl'),
    open: async () => source(),
    batchSize: 100,
    parts: 3,
    maxLineBytes: 1 << 20,
    maxReopens: 0,
  });
}

async function committedLines(tw: TestWarehouse, loadKey: string): Promise<number> {
  const r = await tw.w.pool.query<{ n: number | null }>(
    'select min(lines_committed)::bigint n from load_checkpoints where load_key = $1',
    [loadKey],
  );
  return r.rows[0]?.n ?? 0;
}

async function terminate(tw: TestWarehouse, applicationName: string): Promise<number> {
  const r = await tw.w.pool.query<{ n: number }>(
    `select count(pg_terminate_backend(pid))::int n from pg_stat_activity
     where application_name = $1 and pid <> pg_backend_pid()`,
    [applicationName],
  );
  return r.rows[0]?.n ?? 0;
}

const QUARANTINE = 'select line_no, error_code, raw from rejected_records order by line_no';

describe('database faults', () => {
  let clean: TestWarehouse;
  let tw: TestWarehouse;
  let cleanSummary: Awaited<ReturnType<typeof load>>;
  const opened: Warehouse[] = [];

  /** A pool on the test schema whose sessions carry their own application_name. */
  function side(name: string, timeouts?: Partial<DbTimeouts>, log?: ReturnType<typeof captureLog>['log']) {
    const w = openWarehouse({
      url: tw.url,
      schema: tw.schema,
      max: 8,
      applicationName: name,
      ...(timeouts ? { timeouts } : {}),
      ...(log ? { log } : {}),
    });
    opened.push(w);
    return w;
  }

  beforeAll(async () => {
    clean = await createTestWarehouse({ prefix: 'dbf_clean' });
    tw = await createTestWarehouse({ prefix: 'dbf' });
    cleanSummary = await load(clean.w, 'dbf-clean', () => chunks());
    expect(cleanSummary).toMatchObject({ rowsRead: LINES, rejected: 1 });
  });

  afterAll(async () => {
    for (const w of opened) await w.close().catch(() => {});
    await clean?.dispose();
    await tw?.dispose();
  });

  it("when the loader's connections are terminated mid-import, then the load fails retryably and, run again, resumes to exactly the rows of an uninterrupted load", async () => {
    const app = `crs-dbf-${randomBytes(3).toString('hex')}`;
    const cap = captureLog();
    const w = side(app, undefined, cap.log);
    let terminated = 0;
    const err = await load(w, 'dbf-cut', () =>
      chunks(DATA.length / 2, async () => {
        // Some batches are committed, so the second run has a checkpoint to resume from.
        while ((await committedLines(tw, 'dbf-cut')) === 0) await sleep(10);
        terminated = await terminate(tw, app);
      }),
    ).catch((e: unknown) => e);
    expect(terminated).toBeGreaterThanOrEqual(3);
    expect(err).toBeInstanceOf(CrsError);
    expect(err).toMatchObject({ code: 'DB_UNAVAILABLE', retryable: true });
    expect(dbFailureKind(err)).toBe('connection');
    expect(toFailure(err)).toMatchObject({ type: 'DB_UNAVAILABLE', nonRetryable: false });
    const before = await committedLines(tw, 'dbf-cut');
    expect(before).toBeGreaterThan(0);
    expect(before).toBeLessThan(LINES);
    // The listener every pooled client carries saw the dead connections and said so.
    expect(
      cap.lines.some((l) => l.level === 40 && String(l.msg).includes('warehouse connection failed')),
    ).toBe(true);

    // The same pool: the broken clients were discarded, new ones take their place.
    const again = await load(w, 'dbf-cut', () => chunks());
    expect(again.resumed).toBe(true);
    expect(again.resumedFromLine).toBe(before);
    expect(await messageRows(tw)).toEqual(await messageRows(clean));
    expect((await tw.w.pool.query(QUARANTINE)).rows).toEqual((await clean.w.pool.query(QUARANTINE)).rows);
    for (const k of ['rowsRead', 'inserted', 'updated', 'unchanged', 'rejected', 'deleted'] as const) {
      expect(again[k], k).toBe(cleanSummary[k]);
    }
  });

  it("when a checked-out client's backend is terminated while it is idle, then the process lives on and the pool serves new clients", async () => {
    const app = `crs-dbf-idle-${randomBytes(3).toString('hex')}`;
    const cap = captureLog();
    const w = side(app, undefined, cap.log);
    const client: pg.PoolClient = await w.pool.connect();
    await client.query('select 1');
    const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
    expect(await terminate(tw, app)).toBe(1);
    await ended;
    await expect(client.query('select 1')).rejects.toSatisfy(
      (e: unknown) => dbFailureKind(e) === 'connection',
    );
    client.release();
    expect((await w.pool.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
    expect(cap.lines.filter((l) => String(l.msg).includes('warehouse connection failed')).length).toBe(1);
  });

  it('when a statement runs longer than the statement timeout, then it fails retryably with 57014', async () => {
    const w = side('crs-dbf-slow', { statementMs: 200 });
    const err = await w.pool.query('select pg_sleep(5)').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: '57014' });
    expect(dbFailureKind(err)).toBe('timeout');
    expect(toFailure(err)).toMatchObject({ type: 'DB_TIMEOUT', nonRetryable: false });
  });

  it('when the loader waits on a lock beyond the lock timeout, then the load fails retryably (55P03) naming the setting, and runs once the lock is gone', async () => {
    const holder = await tw.w.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('lock table analytics_messages in access exclusive mode');
      const w = side('crs-dbf-lock', { lockMs: 200 });
      const err = await load(w, 'dbf-lock', () => chunks()).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'DB_TIMEOUT', retryable: true });
      expect((err as Error).message).toContain('CRS_DB_LOCK_TIMEOUT_MS');
      expect((err as Error).message).toContain('55P03');
    } finally {
      await holder.query('rollback');
      holder.release();
    }
    const w = side('crs-dbf-lock-2', { lockMs: 200 });
    const done = await load(w, 'dbf-lock', () => chunks());
    expect(done.rowsRead).toBe(LINES);
  });

  it('when a loader statement is blocked past the statement timeout, then the load fails retryably with 57014', async () => {
    const holder = await tw.w.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('lock table analytics_messages in access exclusive mode');
      const w = side('crs-dbf-stmt', { statementMs: 300, lockMs: 0 });
      const err = await load(w, 'dbf-stmt', () => chunks()).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'DB_TIMEOUT', retryable: true });
      expect((err as Error).message).toContain('57014');
    } finally {
      await holder.query('rollback');
      holder.release();
    }
  });

  it('when a warehouse is opened, then its sessions carry the configured timeouts and server-side keepalive', async () => {
    const w = side('crs-dbf-settings', {
      statementMs: 1234,
      lockMs: 567,
      idleTxMs: 8900,
      keepAliveMs: 20_000,
    });
    const r = await w.pool.query<Record<string, string>>(
      `select current_setting('statement_timeout') s, current_setting('lock_timeout') l,
              current_setting('idle_in_transaction_session_timeout') i,
              current_setting('tcp_keepalives_idle') k, current_setting('application_name') a`,
    );
    expect(r.rows[0]).toEqual({
      s: '1234ms',
      l: '567ms',
      i: '8900ms',
      k: expect.any(String),
      a: 'crs-dbf-settings',
    });
    // Over TCP the server takes the keepalive idle time in seconds (a Unix socket reports 0).
    expect(['20', '0']).toContain(r.rows[0]!.k);
  });

  it('when the database refuses connections, then the failure is a retryable connection failure', async () => {
    const w = openWarehouse({ url: 'postgres://nobody@127.0.0.1:1/none', schema: 'crs', max: 1 });
    opened.push(w);
    const err = await checkConnection(w).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'DB_UNAVAILABLE', retryable: true });
    expect(dbFailureKind(err)).toBe('connection');
  });
});
