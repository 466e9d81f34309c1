import { cancelled } from './rate-limiter.ts';

/**
 * A counting semaphore with a FIFO queue: at most `max` requests in flight at once. A streamed
 * export holds its slot until its body ends, fails or is cancelled.
 */
export interface ConcurrencyLimiter {
  /** Resolves with a release function (idempotent); rejects with CANCELLED when `signal` aborts. */
  acquire(signal?: AbortSignal): Promise<() => void>;
  readonly max: number;
  readonly active: number;
}

export function createConcurrencyLimiter(max: number): ConcurrencyLimiter {
  if (!Number.isInteger(max) || max < 1)
    throw new RangeError(`concurrency must be a positive integer, got ${max}`);
  let active = 0;
  const queue: Array<() => void> = [];

  function releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = queue.shift();
      if (next) next();
      else active--;
    };
  }

  return {
    max,
    get active() {
      return active;
    },
    acquire(signal?: AbortSignal): Promise<() => void> {
      if (signal?.aborted) return Promise.reject(cancelled(signal));
      if (active < max) {
        active++;
        return Promise.resolve(releaser());
      }
      return new Promise((resolve, reject) => {
        // The slot passes straight from the releasing holder to this waiter (active unchanged).
        const grant = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(releaser());
        };
        const onAbort = () => {
          const i = queue.indexOf(grant);
          if (i >= 0) queue.splice(i, 1);
          reject(cancelled(signal));
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        queue.push(grant);
      });
    },
  };
}
