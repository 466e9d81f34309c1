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
 */
export function createSharedRateLimiter(o: SharedLimiterOptions): SharedRateLimiter {
  return new SharedBudgetLimiter(o);
}

/** The queue, the spare grants and the pause of one process's share of the budget. */
class SharedBudgetLimiter implements SharedRateLimiter {
  readonly limit: number;
  readonly windowMs: number;
  readonly #store: BudgetStore;
  readonly #holdMs: number;
  readonly #sharedWindowMs: number;
  readonly #maxBlock: number;
  readonly #now: () => number;
  readonly #log: Logger;
  readonly #queue: Waiter[] = [];
  #spare = 0;
  #spareUntil = 0;
  #pausedUntil = 0;
  #leasing = false;
  #timer: NodeJS.Timeout | undefined;
  #granted = 0;
  #leases = 0;
  #wasted = 0;
  #failures = 0;

  constructor(o: SharedLimiterOptions) {
    this.limit = o.window.limit;
    this.windowMs = o.window.windowMs;
    this.#store = o.store;
    this.#holdMs = o.holdMs ?? DEFAULT_BUDGET_HOLD_MS;
    this.#sharedWindowMs = this.windowMs + this.#holdMs;
    this.#maxBlock = Math.max(1, o.maxBlock ?? Math.ceil(this.limit / 4));
    this.#now = o.now ?? (() => performance.now());
    this.#log = o.log.child({ budget: o.store.name });
  }

  get granted(): number {
    return this.#granted;
  }

  get leases(): number {
    return this.#leases;
  }

  get wasted(): number {
    return this.#wasted;
  }

  async acquire(signal?: AbortSignal): Promise<void> {
    for (;;) {
      if (this.#now() <= (await this.acquireUntil(signal))) return;
      this.#wasted++;
    }
  }

  acquireUntil(signal?: AbortSignal): Promise<number> {
    return enqueue(this.#queue, signal, () => this.#pump());
  }

  async pause(ms: number): Promise<void> {
    if (!(ms > 0)) return;
    this.#pausedUntil = Math.max(this.#pausedUntil, this.#now() + ms);
    this.#spare = 0;
    try {
      await this.#store.pause(ms);
      this.#log.info({ pauseMs: ms }, 'shared rate budget: the service asked to wait; the deployment pauses');
    } catch (err) {
      // This worker pauses anyway; the others learn of it from their own 429s.
      this.#log.warn(
        { pauseMs: ms, kind: dbFailureKind(err) ?? 'other', error: (err as Error).message },
        'shared rate budget: could not record the pause in the warehouse',
      );
    }
  }

  #arm(ms: number): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#pump();
      },
      Math.max(1, Math.ceil(ms)),
    );
  }

  #give(): void {
    while (this.#queue.length > 0 && this.#spare > 0) {
      const w = this.#queue.shift();
      if (!w) break;
      this.#spare--;
      this.#granted++;
      if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
      w.resolve(this.#spareUntil);
    }
  }

  #pump(): void {
    const t = this.#now();
    if (this.#spare > 0 && t > this.#spareUntil) this.#spare = 0;
    this.#give();
    if (this.#queue.length === 0 || this.#leasing || this.#timer !== undefined) return;
    if (t < this.#pausedUntil) {
      this.#arm(this.#pausedUntil - t);
      return;
    }
    void this.#lease();
  }

  async #lease(): Promise<void> {
    this.#leasing = true;
    const want = Math.min(this.#queue.length, this.#maxBlock);
    const sentAt = this.#now();
    let answer: RateBudgetLease;
    try {
      this.#leases++;
      answer = await this.#store.lease(want, this.limit, this.#sharedWindowMs);
    } catch (err) {
      this.#leasing = false;
      this.#leaseFailed(err);
      return;
    }
    this.#leasing = false;
    if (this.#failures > 0)
      this.#log.info({ failures: this.#failures }, 'shared rate budget: the warehouse answers again');
    this.#failures = 0;
    const receivedAt = this.#now();
    if (answer.pausedMs > 0) {
      this.#pausedUntil = Math.max(this.#pausedUntil, receivedAt + answer.pausedMs);
      this.#spare = 0;
      this.#arm(answer.pausedMs);
      return;
    }
    // A lease is asked only when no grant is spare. The block is counted from a moment after
    // `sentAt`: measured from `sentAt`, the hold ends early, never late.
    this.#spare = answer.granted;
    this.#spareUntil = sentAt + this.#holdMs;
    if (this.#spare > 0 && receivedAt > this.#spareUntil) {
      // Awaited only when there is a block to give back: otherwise the grants go out at once.
      const givingBack = this.#dropLate(answer, receivedAt - sentAt);
      if (givingBack) await givingBack;
    }
    this.#give();
    if (this.#queue.length === 0) return;
    if (answer.granted < want) this.#arm(Math.max(1, answer.waitMs));
    else this.#pump();
  }

  /** A lease the store did not answer: the callers wait, the lease is asked again after a backoff. */
  #leaseFailed(err: unknown): void {
    this.#failures++;
    const failures = this.#failures;
    const delay = Math.min(MAX_DB_BACKOFF_MS, 100 * 2 ** Math.min(failures - 1, 6));
    const kind = dbFailureKind(err);
    // The first failure and then one in ten: an outage of minutes must not flood the log.
    if (failures === 1 || failures % 10 === 0) {
      const fields = { failures, kind: kind ?? 'other', retryInMs: delay, error: (err as Error).message };
      if (kind) this.#log.warn(fields, 'shared rate budget: the warehouse did not answer; requests wait');
      else
        this.#log.error(
          fields,
          'shared rate budget: leasing failed (has `crs-sync migrate` run?); requests wait',
        );
    }
    this.#arm(delay);
  }

  /**
   * A block that came too late to start within the hold (a slow database or a busy event loop):
   * dropped, and given back unused (the promise of that) so that the budget does not lose it for
   * a whole window.
   */
  #dropLate(answer: RateBudgetLease, leaseMs: number): Promise<void> | undefined {
    this.#wasted += this.#spare;
    this.#spare = 0;
    this.#log.debug({ wasted: answer.granted, leaseMs }, 'shared rate budget: lease too slow');
    const store = this.#store;
    if (answer.stamp === undefined || !store.release) return undefined;
    // One call to the store at a time, as for leases.
    this.#leasing = true;
    return store
      .release(answer.stamp)
      .finally(() => {
        this.#leasing = false;
      })
      .catch((err: unknown) => {
        this.#log.debug(
          { error: (err as Error).message },
          'shared rate budget: could not give a late block back',
        );
      });
  }
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
