import { request } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createConcurrencyLimiter } from '../../src/api/concurrency.ts';
import type { HttpRequest, ServiceClientOptions } from '../../src/api/index.ts';
import { createRateLimiter, rateWindow } from '../../src/api/rate-limiter.ts';
import { client } from './helpers/client-setup.ts';
import {
  maxInAnyWindow,
  type ScriptedServer,
  sendJson,
  startScriptedServer,
} from './helpers/scripted-server.ts';

let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/**
 * A client whose every HTTP attempt is timed where it starts: the call into undici, right after
 * the attempt took its rate grant. That is the moment the limiter controls; the scripted server
 * then confirms that every recorded start really reached it. (Arrival times at a server are not
 * asserted on: on a loaded machine a request on a new connection can reach the server's event
 * loop hundreds of ms after it was sent while the next ones, on warm connections, do not, which
 * compresses gaps no client can control. The 50 ms window margin absorbs ordinary jitter.)
 */
function timedClient(url: string, over: Partial<ServiceClientOptions>) {
  const starts: number[] = [];
  const timedRequest: HttpRequest = (input, init) => {
    starts.push(performance.now());
    return request(input, init);
  };
  return { ...client(url, { ...over, request: timedRequest }), starts };
}

describe('rate budget: request starts against a scripted server', () => {
  it('when 30 calls are made at once with a limit of 5/s, then no 1-second window sees more than 5 starts', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { threads: [] }));
    const { api, starts } = timedClient(server.url, { rateLimitRps: 5, concurrency: 30 });
    await Promise.all(Array.from({ length: 30 }, () => api.listThreads()));
    expect(starts).toHaveLength(30);
    expect(server.seen).toHaveLength(30);
    expect(maxInAnyWindow(starts, 1000)).toBe(5);
  });

  it('when half the attempts fail and are retried, then retries count against the same budget', async () => {
    // Every odd request fails with 503 and Retry-After: 0, so retries would go out at once if
    // they bypassed the budget.
    server = await startScriptedServer((_req, res, n) =>
      n % 2 === 1 ? sendJson(res, 503, {}, { 'retry-after': '0' }) : sendJson(res, 200, { threads: [] }),
    );
    const { api, starts } = timedClient(server.url, { rateLimitRps: 6, concurrency: 20, maxRetries: 10 });
    await Promise.all(Array.from({ length: 12 }, () => api.listThreads()));
    expect(api.stats().retries).toBeGreaterThan(0);
    expect(starts.length).toBe(12 + api.stats().retries);
    expect(server.seen).toHaveLength(starts.length);
    expect(maxInAnyWindow(starts, 1000)).toBeLessThanOrEqual(6);
  });

  it('when the rate is fractional (2.5/s), then no 1-second window sees more than 2 starts', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { threads: [] }));
    const { api, starts } = timedClient(server.url, { rateLimitRps: 2.5, concurrency: 10 });
    await Promise.all(Array.from({ length: 7 }, () => api.listThreads()));
    expect(server.seen).toHaveLength(7);
    expect(maxInAnyWindow(starts, 1000)).toBe(2);
  });

  it('when calls are spread over time in bursts, then the property holds across the bursts', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { threads: [] }));
    const { api, starts } = timedClient(server.url, { rateLimitRps: 4, concurrency: 10 });
    const calls: Promise<unknown>[] = [];
    for (let burst = 0; burst < 4; burst++) {
      for (let i = 0; i < 5; i++) calls.push(api.listThreads());
      await new Promise((r) => setTimeout(r, 300));
    }
    await Promise.all(calls);
    expect(server.seen).toHaveLength(20);
    expect(maxInAnyWindow(starts, 1000)).toBeLessThanOrEqual(4);
  });
});

describe('concurrency limit, measured at a scripted server', () => {
  it('when 20 calls are made with concurrency 3, then the server never holds more than 3 at once', async () => {
    let inFlight = 0;
    let peak = 0;
    server = await startScriptedServer((_req, res) => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      setTimeout(() => {
        inFlight--;
        sendJson(res, 200, { threads: [] });
      }, 20);
    });
    const { api } = client(server.url, { rateLimitRps: 1000, concurrency: 3 });
    await Promise.all(Array.from({ length: 20 }, () => api.listThreads()));
    expect(server.seen).toHaveLength(20);
    expect(peak).toBe(3);
  });
});

describe('limiter units', () => {
  it('when a rate is turned into a window, then whole starts per second are never rounded up', () => {
    expect(rateWindow(10, 0)).toEqual({ limit: 10, windowMs: 1000 });
    expect(rateWindow(2.5, 50)).toEqual({ limit: 2, windowMs: 1050 });
    expect(rateWindow(0.5, 0)).toEqual({ limit: 1, windowMs: 2000 });
    expect(() => rateWindow(0, 0)).toThrow(RangeError);
  });

  it('when grants are taken with a manual clock, then the (limit+1)-th waits until that clock says the oldest left the window', async () => {
    // The limiter's timers are the test's too, and move only when the test moves them: nothing
    // here waits on real time, so a limiter reading the real clock instead of `now` (which
    // stands still here) would never grant the third, and one that ignored its timer would not
    // either.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      let now = 0;
      const rl = createRateLimiter({ limit: 2, windowMs: 1000 }, () => now);
      await rl.acquire();
      await rl.acquire();
      let third = false;
      const p = rl.acquire().then(() => {
        third = true;
      });
      // Its timer fires, but the clock says 999 ms: the oldest grant is still in the window.
      now = 999;
      await vi.advanceTimersByTimeAsync(1000);
      expect(third).toBe(false);
      expect(rl.granted).toBe(2);
      // One more millisecond on both: the oldest leaves, the third is granted.
      now = 1000;
      await vi.advanceTimersByTimeAsync(1);
      expect(third).toBe(true);
      expect(rl.granted).toBe(3);
      await p;
    } finally {
      vi.useRealTimers();
    }
  });

  it('when a queued rate waiter is aborted, then it rejects with CANCELLED and does not consume a grant', async () => {
    const now = 0;
    const rl = createRateLimiter({ limit: 1, windowMs: 1000 }, () => now);
    await rl.acquire();
    const ctrl = new AbortController();
    const p = rl.acquire(ctrl.signal);
    ctrl.abort();
    await expect(p).rejects.toMatchObject({ code: 'CANCELLED' });
    expect(rl.granted).toBe(1);
  });

  it('when a concurrency slot is released, then the first waiter gets it and active never exceeds max', async () => {
    const sem = createConcurrencyLimiter(1);
    const release = await sem.acquire();
    const order: number[] = [];
    const a = sem.acquire().then((r) => {
      order.push(1);
      return r;
    });
    const b = sem.acquire().then((r) => {
      order.push(2);
      return r;
    });
    release();
    release(); // idempotent: must not free a second slot
    const ra = await a;
    expect(sem.active).toBe(1);
    expect(order).toEqual([1]);
    ra();
    (await b)();
    expect(order).toEqual([1, 2]);
    expect(sem.active).toBe(0);
  });

  it('when a queued concurrency waiter is aborted, then it rejects with CANCELLED and the slot goes to the next one', async () => {
    const sem = createConcurrencyLimiter(1);
    const release = await sem.acquire();
    const ctrl = new AbortController();
    const aborted = sem.acquire(ctrl.signal);
    const next = sem.acquire();
    ctrl.abort();
    await expect(aborted).rejects.toMatchObject({ code: 'CANCELLED' });
    release();
    const r = await next;
    expect(sem.active).toBe(1);
    r();
    expect(sem.active).toBe(0);
  });
});
