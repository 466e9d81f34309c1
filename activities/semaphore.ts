import { CrsError } from '../src/errors.ts';

export interface Semaphore {
  /** Waits for a free slot (in order of arrival) and returns its release; rejects when cancelled. */
  acquire(signal: AbortSignal): Promise<() => void>;
}

/** A counting semaphore for activities: waiters queue in order and give up when cancelled. */
export function createSemaphore(limit: number): Semaphore {
  let free = limit;
  const queue: (() => void)[] = [];
  const release = () => {
    const next = queue.shift();
    if (next) next();
    else free += 1;
  };
  return {
    async acquire(signal: AbortSignal): Promise<() => void> {
      if (free > 0) {
        free -= 1;
        return once(release);
      }
      await new Promise<void>((resolve, reject) => {
        const grant = () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = () => {
          const i = queue.indexOf(grant);
          if (i >= 0) queue.splice(i, 1);
          reject(new CrsError('CANCELLED', 'cancelled while waiting for a free day-load slot'));
        };
        queue.push(grant);
        signal.addEventListener('abort', onAbort, { once: true });
      });
      return once(release);
    },
  };
}

function once(f: () => void): () => void {
  let done = false;
  return () => {
    if (!done) {
      done = true;
      f();
    }
  };
}
