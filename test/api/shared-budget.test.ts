import pg from 'pg';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient, type HttpRequest } from '../../src/api/index.ts';
import { createSharedRateLimiter, DEFAULT_BUDGET_HOLD_MS } from '../../src/api/shared-budget.ts';
import { migrateToLatest } from '../../src/warehouse/migrator.ts';
import { rateBudgetOnPool } from '../../src/warehouse/rate-budget.ts';
import { budgetGrants, budgetPauses, installBudgetAudit } from '../helpers/budget-audit.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { captureLog, client, options } from './helpers/client-setup.ts';
import {
  maxInAnyWindow,
  type ScriptedServer,
  sendJson,
  startScriptedServer,
} from './helpers/scripted-server.ts';

/** The shared request budget's store (a row and a function in the warehouse) and its limiter. */

let tw: TestWarehouse;
beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'trate' });
});
afterAll(async () => {
  await tw?.dispose();
});

describe('the budget row (rate_budget_lease)', () => {
  it('when leases ask for more than the window has left, then only what is left is granted, with the wait until the oldest block leaves', async () => {
    const store = rateBudgetOnPool(tw.w.pool, 'full');
    const a = await store.lease(30, 50, 60_000);
    const b = await store.lease(30, 50, 60_000);
    const c = await store.lease(5, 50, 60_000);
    expect(a).toMatchObject({ granted: 30, waitMs: 0, pausedMs: 0 });
    expect(b.granted).toBe(20);
    expect(c.granted).toBe(0);
    // The window is a minute: the oldest block leaves it within that minute, not before a second.
    expect(c.waitMs).toBeGreaterThan(1_000);
    expect(c.waitMs).toBeLessThanOrEqual(60_000);
  });

  it('when a block is given back unused, then its grants can be leased again at once, and the other blocks stay', async () => {
    const store = rateBudgetOnPool(tw.w.pool, 'released');
    const first = await store.lease(20, 50, 60_000);
    const late = await store.lease(30, 50, 60_000);
    expect([first.granted, late.granted]).toEqual([20, 30]);
    expect(late.stamp).toBeDefined();
    await store.release(late.stamp ?? '');
    // Giving it back twice changes nothing: the block is gone.
    await store.release(late.stamp ?? '');
    expect((await store.lease(50, 50, 60_000)).granted).toBe(30);
  });

  it('when two budgets have different names, then each has its own limit', async () => {
    const one = rateBudgetOnPool(tw.w.pool, 'tenant-a');
    const two = rateBudgetOnPool(tw.w.pool, 'tenant-b');
    expect((await one.lease(10, 10, 60_000)).granted).toBe(10);
    expect((await two.lease(10, 10, 60_000)).granted).toBe(10);
    expect((await one.lease(1, 10, 60_000)).granted).toBe(0);
  });

  it('when a block leaves the window, then its grants can be leased again (a dead holder leaks nothing)', async () => {
    const store = rateBudgetOnPool(tw.w.pool, 'ages-out');
    expect((await store.lease(4, 4, 200)).granted).toBe(4);
    const full = await store.lease(4, 4, 200);
    expect(full.granted).toBe(0);
    await new Promise((r) => setTimeout(r, full.waitMs + 20));
    expect((await store.lease(4, 4, 200)).granted).toBe(4);
  });

  it('when two workers share a budget asking for different limits, then the lower limit holds for both, whichever leased first', async () => {
    const high = rateBudgetOnPool(tw.w.pool, 'mixed');
    const low = rateBudgetOnPool(tw.w.pool, 'mixed');
    // The worker with 50 leases first: nothing else asked yet, so its own limit applies.
    expect((await high.lease(8, 50, 60_000)).granted).toBe(8);
    // Then a worker asking for 10: 8 are used, so 2 are left of the lower limit.
    expect((await low.lease(10, 10, 60_000)).granted).toBe(2);
    // And the worker with 50 gets nothing more: the window holds 10, not 50.
    const refused = await high.lease(10, 50, 60_000);
    expect(refused.granted).toBe(0);
    expect(refused.waitMs).toBeGreaterThan(0);
    const row = await tw.w.pool.query<{ limit_per_window: number }>(
      `select limit_per_window from rate_budget where name = 'mixed'`,
    );
    expect(row.rows[0]?.limit_per_window).toBe(10);
  });

  it('when the deployment fixes the budget (CRS_SHARED_BUDGET_RPS), then its limit holds whatever the workers ask, lower or higher', async () => {
    const fixed = rateBudgetOnPool(tw.w.pool, 'fixed', undefined, { fixed: true });
    const low = rateBudgetOnPool(tw.w.pool, 'fixed');
    const high = rateBudgetOnPool(tw.w.pool, 'fixed');
    expect((await fixed.lease(5, 20, 60_000)).granted).toBe(5);
    // A worker asking for 5 does not lower the deployment's 20 ...
    expect((await low.lease(10, 5, 60_000)).granted).toBe(10);
    // ... and one asking for 100 does not raise it: 15 are used, 5 are left.
    expect((await high.lease(50, 100, 60_000)).granted).toBe(5);
    expect((await high.lease(1, 100, 60_000)).granted).toBe(0);
  });

  it('when a lease names a window or a limit below 1, then it fails instead of granting without limit', async () => {
    const store = rateBudgetOnPool(tw.w.pool, 'no-window');
    await expect(store.lease(1000, 5, 0)).rejects.toThrow(/must be at least 1/);
    await expect(store.lease(1000, 5, -1_000)).rejects.toThrow(/must be at least 1/);
    await expect(store.lease(1000, 0, 1_000)).rejects.toThrow(/must be at least 1/);
    // Nothing was granted by those: the whole limit is still there.
    expect((await store.lease(1000, 5, 60_000)).granted).toBe(5);
  });

  it('when the budget is paused, then nothing is granted until it ends, and a shorter pause does not shorten it', async () => {
    const store = rateBudgetOnPool(tw.w.pool, 'paused');
    await store.pause(30_000);
    await store.pause(1_000);
    const r = await store.lease(5, 50, 1_000);
    expect(r.granted).toBe(0);
    expect(r.pausedMs).toBeGreaterThan(20_000);
    const other = rateBudgetOnPool(tw.w.pool, 'not-paused');
    expect((await other.lease(5, 50, 1_000)).granted).toBe(5);
  });
});

describe("the tests' grant audit (test/helpers/budget-audit.ts) on the budget row", () => {
  let audited: TestWarehouse;
  beforeAll(async () => {
    audited = await createTestWarehouse({ prefix: 'taudit' });
    await installBudgetAudit(audited.w.pool, audited.schema);
  });
  afterAll(async () => {
    await audited?.dispose();
  });

  it('when blocks are leased, one given back and others age out, then the audit holds what the database granted: releases subtracted, aged blocks still counted', async () => {
    const store = rateBudgetOnPool(audited.w.pool, 'audited');
    const a = await store.lease(3, 4, 3_000);
    const late = await store.lease(3, 4, 3_000);
    expect([a.granted, late.granted]).toEqual([3, 1]);
    await store.release(late.stamp ?? '');
    // Full again (3 of 4 used): this lease gets 1, and nothing of the first block.
    expect((await store.lease(5, 4, 3_000)).granted).toBe(1);
    await new Promise((r) => setTimeout(r, 3_100));
    // A window of seconds: the three leases above are in it even on a loaded machine.
    // The first blocks aged out: this lease drops them from the row; they stay granted.
    expect((await store.lease(4, 4, 3_000)).granted).toBe(4);
    const g = await budgetGrants(audited.w.pool, audited.schema, 'audited');
    expect(g).toMatchObject({ leased: 9, released: 1, net: 8, blocks: 3, limit: 4, windowMs: 3_000 });
    expect(g.maxInWindow).toBe(4);
    // Over a window long enough to hold every block: all of them.
    expect((await budgetGrants(audited.w.pool, audited.schema, 'audited', 60_000)).maxInWindow).toBe(8);
  });

  it('when a lease comes back after the hold, then its grants go unused and back to the row, and the caller starts on a fresh lease', async () => {
    // The limiter's clock is the test's: the first lease takes longer than the hold by it, so
    // nothing here depends on how fast this machine is.
    let now = 1_000;
    const store = rateBudgetOnPool(audited.w.pool, 'audited-hold');
    let slow = true;
    const limiter = createSharedRateLimiter({
      store: {
        ...store,
        lease: async (want, limit, windowMs) => {
          const answer = await store.lease(want, limit, windowMs);
          if (slow) now += DEFAULT_BUDGET_HOLD_MS + 1;
          slow = false;
          return answer;
        },
      },
      window: { limit: 5, windowMs: 1_000 },
      log: captureLog().log,
      now: () => now,
    });
    const deadline = await limiter.acquireUntil();
    // Granted by the second lease, with the whole hold ahead of the caller.
    expect(deadline).toBe(now + DEFAULT_BUDGET_HOLD_MS);
    expect([limiter.leases, limiter.wasted]).toEqual([2, 1]);
    const g = await budgetGrants(audited.w.pool, audited.schema, 'audited-hold');
    expect(g).toMatchObject({ leased: 2, released: 1, net: 1, blocks: 1 });
  });

  it('when the budget is paused, then the audit holds the pause in database time, and no grant inside it', async () => {
    const store = rateBudgetOnPool(audited.w.pool, 'audited-pause');
    expect((await store.lease(2, 50, 1_000)).granted).toBe(2);
    await store.pause(300);
    expect((await store.lease(2, 50, 1_000)).granted).toBe(0);
    await new Promise((r) => setTimeout(r, 350));
    expect((await store.lease(2, 50, 1_000)).granted).toBe(2);
    const pauses = await budgetPauses(audited.w.pool, audited.schema, 'audited-pause');
    expect(pauses).toHaveLength(1);
    // Its end is 300 ms from when the pause was asked; its start, when the row took it.
    expect(pauses[0]!.lengthMs).toBeGreaterThan(0);
    expect(pauses[0]!.lengthMs).toBeLessThanOrEqual(301);
    expect(pauses[0]).toMatchObject({ grantsDuring: 0, grantsAfter: 1 });
  });
});

describe('a client on the shared budget', () => {
  let server: ScriptedServer | undefined;
  afterAll(async () => {
    await server?.close();
  });

  it('when 30 calls are made at once with a limit of 5/s, then no 1-second window sees more than 5 starts', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { threads: [] }));
    const starts: number[] = [];
    const timed: HttpRequest = (input, init) => {
      starts.push(performance.now());
      return request(input, init);
    };
    const budget = rateBudgetOnPool(tw.w.pool, 'client-5');
    const { api } = client(server.url, { rateLimitRps: 5, concurrency: 30, request: timed, budget });
    await Promise.all(Array.from({ length: 30 }, () => api.listThreads()));
    expect(server.seen).toHaveLength(30);
    expect(maxInAnyWindow(starts, 1000)).toBeLessThanOrEqual(5);
    expect(api.rate.budget).toBe('client-5');
    await server.close();
    server = undefined;
  });

  it('when a 429 carries Retry-After, then the pause is recorded in the budget row for every worker', async () => {
    server = await startScriptedServer((_req, res) =>
      sendJson(res, 429, { detail: 'slow down' }, { 'retry-after': '30' }),
    );
    const budget = rateBudgetOnPool(tw.w.pool, 'client-429');
    const { api } = client(server.url, { rateLimitRps: 50, maxRetries: 0, budget });
    await expect(api.listThreads()).rejects.toMatchObject({ code: 'HTTP_THROTTLED' });
    // Another worker's lease now waits: nothing is granted, the pause has most of its 30 s left.
    const other = await rateBudgetOnPool(tw.w.pool, 'client-429').lease(1, 50, 1_050);
    expect(other.granted).toBe(0);
    expect(other.pausedMs).toBeGreaterThan(20_000);
    await server.close();
    server = undefined;
  });

  it('when the budget row stays locked past lock_timeout, then calls wait (logged as the warehouse not answering) and go out once it is free', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { threads: [] }));
    // The budget's own connection gives up on a lock after 100 ms, as a worker's does after 5 s.
    const pool = new pg.Pool({
      connectionString: tw.url,
      options: `-c search_path=${tw.schema},${tw.schema}_internal -c lock_timeout=100`,
      max: 1,
    });
    const locker = await tw.w.pool.connect();
    try {
      const { log, text } = captureLog();
      const api = createServiceClient(
        { ...options(server.url), budget: rateBudgetOnPool(pool, 'locked') },
        log,
      );
      await api.listThreads();
      await locker.query('begin');
      await locker.query(`select * from rate_budget where name = 'locked' for update`);
      const calls = Promise.all([api.listThreads(), api.listThreads()]);
      for (let i = 0; i < 100 && !text().includes('did not answer'); i++)
        await new Promise((r) => setTimeout(r, 20));
      expect(text()).toContain('shared rate budget: the warehouse did not answer');
      expect(text()).toContain('"kind":"timeout"');
      expect(server.seen).toHaveLength(1);
      await locker.query('commit');
      await expect(calls).resolves.toEqual([[], []]);
      expect(server.seen).toHaveLength(3);
      expect(text()).toContain('the warehouse answers again');
    } finally {
      await locker.query('rollback').catch(() => {});
      locker.release();
      await pool.end();
      await server.close();
      server = undefined;
    }
  });

  it('when the warehouse has no budget table yet, then calls wait (logged) instead of failing, and go out once it exists', async () => {
    const bare = await createTestWarehouse({ prefix: 'trate0', migrate: false });
    try {
      server = await startScriptedServer((_req, res) => sendJson(res, 200, { threads: [] }));
      const { log, text } = captureLog();
      const api = createServiceClient(
        { ...options(server.url), budget: rateBudgetOnPool(bare.w.pool, 'late') },
        log,
      );
      const call = api.listThreads();
      let settled = false;
      void call.finally(() => {
        settled = true;
      });
      // The first lease fails and is retried after 100 ms, 200 ms, …: let a few go by.
      for (let i = 0; i < 50 && !text().includes('leasing failed'); i++)
        await new Promise((r) => setTimeout(r, 20));
      expect(text()).toContain('has `crs-sync migrate` run?');
      expect(settled).toBe(false);
      expect(server.seen).toHaveLength(0);
      await migrateToLatest(bare.w);
      await expect(call).resolves.toEqual([]);
      expect(server.seen).toHaveLength(1);
    } finally {
      await bare.dispose();
    }
  });
});
