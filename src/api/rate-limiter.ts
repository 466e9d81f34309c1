import { f64At, present } from '../common/checked.ts';
import { CrsError } from '../errors.ts';

/**
 * The client's one request-rate budget: at most `limit` request starts in any window of
 * `windowMs` milliseconds, exactly (a sliding window over the last `limit` grant times, with a
 * FIFO queue of waiters). Every HTTP attempt takes a grant just before it starts, retries and
 * token exchanges included, so the configured rate holds during retry storms too.
 *
 * A token bucket would allow a burst of `limit` at the end of one second and another at the
 * start of the next; the sliding window never does.
 */
export interface RateLimiter {
  /** Resolves when the caller may start one request; rejects with CANCELLED when `signal` aborts. */
  acquire(signal?: AbortSignal): Promise<void>;
  readonly limit: number;
  readonly windowMs: number;
  /** Number of grants handed out so far. */
  readonly granted: number;
  /**
   * Retry-After from the service: no grant for `ms` (the shared budget pauses the deployment,
   * src/api/shared-budget.ts). The process-local limiter has none: each call waits on its own.
   */
  pause?(ms: number): Promise<void>;
}

export interface RateWindow {
  limit: number;
  windowMs: number;
}

/**
 * Turns requests-per-second into a whole number of starts per window. A fractional rate ≥ 1 is
 * rounded down (2.5 rps would otherwise allow 3 starts in some second); a rate below 1 becomes
 * one start per 1/rps seconds. `marginMs` widens the window so that jitter between our clock and
 * the server's arrival times (connection set-up, scheduling) cannot squeeze two grants that are
 * exactly one window apart into the same server-side second.
 */
export function rateWindow(rps: number, marginMs: number): RateWindow {
  if (!(rps > 0) || !Number.isFinite(rps))
    throw new RangeError(`rate limit must be a positive number, got ${rps}`);
  if (rps >= 1) return { limit: Math.floor(rps), windowMs: 1000 + marginMs };
  return { limit: 1, windowMs: Math.ceil(1000 / rps) + marginMs };
}

/** A caller waiting in a limiter's FIFO queue; leaves it (rejected CANCELLED) when its signal aborts. */
export interface Waiter<T = void> {
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/**
 * Queues a caller and runs `pump` (which hands out what is free): the promise settles when `pump`
 * resolves the waiter, or rejects with CANCELLED when `signal` aborts first, leaving the queue.
 */
export function enqueue<T>(
  queue: Waiter<T>[],
  signal: AbortSignal | undefined,
  pump: () => void,
): Promise<T> {
  if (signal?.aborted) return Promise.reject(cancelled(signal));
  return new Promise<T>((resolve, reject) => {
    const w: Waiter<T> = { resolve, reject, signal, onAbort: undefined };
    if (signal) {
      w.onAbort = () => {
        const i = queue.indexOf(w);
        if (i >= 0) queue.splice(i, 1);
        reject(cancelled(signal));
      };
      signal.addEventListener('abort', w.onAbort, { once: true });
    }
    queue.push(w);
    pump();
  });
}

export function createRateLimiter(
  window: RateWindow,
  now: () => number = () => performance.now(),
): RateLimiter {
  const { limit, windowMs } = window;
  if (!Number.isInteger(limit) || limit < 1)
    throw new RangeError(`limit must be a positive integer, got ${limit}`);
  // Grant times of the last `limit` starts, as a ring: `next` is the oldest once the ring is full.
  const recent = new Float64Array(limit);
  let filled = 0;
  let next = 0;
  const queue: Waiter[] = [];
  let timer: NodeJS.Timeout | undefined;
  let granted = 0;

  function pump(): void {
    while (queue.length > 0) {
      const t = now();
      const oldest = f64At(recent, next);
      if (filled === limit && t - oldest < windowMs) {
        if (timer === undefined) {
          // Timers may fire a little early; pump re-checks the clock and re-arms if so.
          timer = setTimeout(
            () => {
              timer = undefined;
              pump();
            },
            Math.max(1, Math.ceil(oldest + windowMs - t)),
          );
        }
        return;
      }
      const w = present(queue.shift(), 'the first waiter');
      recent[next] = t;
      next = (next + 1) % limit;
      if (filled < limit) filled++;
      granted++;
      if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
      w.resolve();
    }
  }

  return {
    limit,
    windowMs,
    get granted() {
      return granted;
    },
    acquire(signal?: AbortSignal): Promise<void> {
      return enqueue(queue, signal, pump);
    },
  };
}

export function cancelled(signal: AbortSignal | undefined): CrsError {
  return new CrsError('CANCELLED', 'request cancelled', { cause: signal?.reason });
}
