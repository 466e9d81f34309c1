import type { Logger } from '../log.ts';
import { budgetWaitStarted } from '../metrics/pipeline.ts';
import { dbFailureKind } from '../warehouse/db-errors.ts';
import { BUDGET_HOLD_MS, type RateBudgetLease } from '../warehouse/rate-budget.ts';
import { enqueue, type RateLimiter, type Waiter as RateWaiter, type RateWindow } from './rate-limiter.ts';

/** Where the deployment's budget lives (src/warehouse/rate-budget.ts: a row in the warehouse). */
export interface BudgetStore {
  readonly name: string;
  lease(want: number, limit: number, windowMs: number): Promise<RateBudgetLease>;
  /** Gives back an unused block (a lease that came back too late); optional. */
  release?(stamp: string): Promise<void>;
  pause(ms: number): Promise<void>;
}

export interface SharedLimiterOptions {
  store: BudgetStore;
  /** The tenant's limit without a margin (`rateWindow(rps, 0)`): `limit` starts per `windowMs`. */
  window: RateWindow;
  /**
   * How long after its lease was asked for a grant may still start a request. The database
   * counts a block at the moment it granted it, so it counts it for `window.windowMs + holdMs`:
   * starts then stay within the limit in any `window.windowMs`. Grants arrive a few ms after the
   * database stamped them, so the rest of the hold is the margin against jitter between our
   * starts and the service's arrivals; a lease slower than the hold wastes its grants.
   */
  holdMs?: number;
  /** Most grants one lease asks for (default a quarter of the limit): leaves room for the other workers. */
  maxBlock?: number;
  log: Logger;
  now?: () => number;
}

export const DEFAULT_BUDGET_HOLD_MS = BUDGET_HOLD_MS;
const MAX_DB_BACKOFF_MS = 5_000;

/** Resolved with the moment (`now()`) by which the grant's request must start. */
type Waiter = RateWaiter<number>;

export interface SharedRateLimiter extends RateLimiter {
  /**
   * A grant, with the moment (`performance.now()`) by which its request must start: a caller
   * held up past it (a busy event loop, a process the OS did not schedule) must ask again.
   */
  acquireUntil(signal?: AbortSignal): Promise<number>;
  /** Retry-After from the service: nobody in the deployment starts a request for `ms`. */
  pause(ms: number): Promise<void>;
  /** Leases asked of the store so far (for benchmarks and logs). */
  readonly leases: number;
  /** Grants that arrived after their hold had passed, and were dropped unused. */
  readonly wasted: number;
}

/**
 * The deployment's request budget, shared by every worker through the warehouse. A waiting
 * caller joins a FIFO queue; one lease at a time asks the store for as many grants as there are
 * waiters (at most `maxBlock`) and hands them out at once. Grants not started within `holdMs`
 * of the lease are dropped, so every request starts within `holdMs` of the database moment that
 * counted it, and the store's sliding window of `window.windowMs + holdMs` bounds the starts in
 * any window of `window.windowMs` across all workers to `window.limit`.
 *
 * Database trouble while leasing never fails a request and never lets one through: the caller
 * waits, and the lease is retried with backoff (100 ms doubling to 5 s) until the database
 * answers. A worker without its warehouse commits nothing anyway, and a guessed local share
 * could exceed the tenant's limit when several workers guess at once.
 *
 * Long: one closure over the queue, the spare grants and the pause, shared by its small inner
 * functions (pump, lease, give), as in the process-local limiter.
 */
export function createSharedRateLimiter(o: SharedLimiterOptions): SharedRateLimiter {
  const { limit, windowMs } = o.window;
  const holdMs = o.holdMs ?? DEFAULT_BUDGET_HOLD_MS;
  const sharedWindowMs = windowMs + holdMs;
  const maxBlock = Math.max(1, o.maxBlock ?? Math.ceil(limit / 4));
  const now = o.now ?? (() => performance.now());
  const log = o.log.child({ budget: o.store.name });
  const queue: Waiter[] = [];
  let spare = 0;
  let spareUntil = 0;
  let pausedUntil = 0;
  let leasing = false;
  let timer: NodeJS.Timeout | undefined;
  let granted = 0;
  let leases = 0;
  let wasted = 0;
  let failures = 0;

  function arm(ms: number): void {
    if (timer !== undefined) return;
    timer = setTimeout(
      () => {
        timer = undefined;
        pump();
      },
      Math.max(1, Math.ceil(ms)),
    );
  }

  function give(): void {
    while (queue.length > 0 && spare > 0) {
      const w = queue.shift();
      if (!w) break;
      spare--;
      granted++;
      if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
      w.resolve(spareUntil);
    }
  }

  function pump(): void {
    const t = now();
    if (spare > 0 && t > spareUntil) spare = 0;
    give();
    if (queue.length === 0 || leasing || timer !== undefined) return;
    if (t < pausedUntil) {
      arm(pausedUntil - t);
      return;
    }
    void lease();
  }

  async function lease(): Promise<void> {
    leasing = true;
    const want = Math.min(queue.length, maxBlock);
    const sentAt = now();
    let answer: RateBudgetLease;
    try {
      leases++;
      answer = await o.store.lease(want, limit, sharedWindowMs);
    } catch (err) {
      leasing = false;
      failures++;
      const delay = Math.min(MAX_DB_BACKOFF_MS, 100 * 2 ** Math.min(failures - 1, 6));
      const kind = dbFailureKind(err);
      // The first failure and then one in ten: an outage of minutes must not flood the log.
      if (failures === 1 || failures % 10 === 0) {
        const fields = { failures, kind: kind ?? 'other', retryInMs: delay, error: (err as Error).message };
        if (kind) log.warn(fields, 'shared rate budget: the warehouse did not answer; requests wait');
        else
          log.error(
            fields,
            'shared rate budget: leasing failed (has `crs-sync migrate` run?); requests wait',
          );
      }
      arm(delay);
      return;
    }
    leasing = false;
    if (failures > 0) log.info({ failures }, 'shared rate budget: the warehouse answers again');
    failures = 0;
    const receivedAt = now();
    if (answer.pausedMs > 0) {
      pausedUntil = Math.max(pausedUntil, receivedAt + answer.pausedMs);
      spare = 0;
      arm(answer.pausedMs);
      return;
    }
    // A lease is asked only when no grant is spare. The block is counted from a moment after
    // `sentAt`: measured from `sentAt`, the hold ends early, never late.
    spare = answer.granted;
    spareUntil = sentAt + holdMs;
    if (spare > 0 && receivedAt > spareUntil) {
      // Too late to start within the hold (a slow database or a busy event loop): given back
      // unused, so that the budget does not lose it for a whole window.
      wasted += spare;
      spare = 0;
      log.debug(
        { wasted: answer.granted, leaseMs: receivedAt - sentAt },
        'shared rate budget: lease too slow',
      );
      if (answer.stamp !== undefined && o.store.release) {
        // One call to the store at a time, as for leases.
        leasing = true;
        await o.store
          .release(answer.stamp)
          .finally(() => {
            leasing = false;
          })
          .catch((err: unknown) => {
            log.debug(
              { error: (err as Error).message },
              'shared rate budget: could not give a late block back',
            );
          });
      }
    }
    give();
    if (queue.length === 0) return;
    if (answer.granted < want) arm(Math.max(1, answer.waitMs));
    else pump();
  }

  function acquireUntil(signal?: AbortSignal): Promise<number> {
    return enqueue(queue, signal, pump);
  }

  return {
    limit,
    windowMs,
    get granted() {
      return granted;
    },
    get leases() {
      return leases;
    },
    get wasted() {
      return wasted;
    },
    async acquire(signal?: AbortSignal): Promise<void> {
      for (;;) {
        if (now() <= (await acquireUntil(signal))) return;
        wasted++;
      }
    },
    acquireUntil,
    async pause(ms: number): Promise<void> {
      if (!(ms > 0)) return;
      pausedUntil = Math.max(pausedUntil, now() + ms);
      spare = 0;
      try {
        await o.store.pause(ms);
        log.info({ pauseMs: ms }, 'shared rate budget: the service asked to wait; the deployment pauses');
      } catch (err) {
        // This worker pauses anyway; the others learn of it from their own 429s.
        log.warn(
          { pauseMs: ms, kind: dbFailureKind(err) ?? 'other', error: (err as Error).message },
          'shared rate budget: could not record the pause in the warehouse',
        );
      }
    },
  };
}

/**
 * The process-local limiter (the fast path, at the tenant's limit) in front of the shared one:
 * a caller takes a local grant first, then a shared one, and starts its request at once.
 */
export function chainLimiters(
  local: RateLimiter,
  shared: SharedRateLimiter,
): SharedRateLimiter & RateLimiter {
  return {
    limit: shared.limit,
    windowMs: shared.windowMs,
    get granted() {
      return shared.granted;
    },
    get leases() {
      return shared.leases;
    },
    get wasted() {
      return shared.wasted;
    },
    async acquire(signal?: AbortSignal) {
      const waited = budgetWaitStarted();
      try {
        await local.acquire(signal);
        await shared.acquire(signal);
      } finally {
        waited();
      }
    },
    async acquireUntil(signal?: AbortSignal) {
      const waited = budgetWaitStarted();
      try {
        await local.acquire(signal);
        return await shared.acquireUntil(signal);
      } finally {
        waited();
      }
    },
    pause: (ms) => shared.pause(ms),
  };
}
