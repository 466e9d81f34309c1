import { CrsError } from '../src/errors.ts';

/**
 * A counting semaphore for activities: waiters queue in order, call `whileWaiting` every 10 s
 * (a heartbeat, so a long wait is not taken for a dead worker) and give up when cancelled.
 */
export function createSemaphore(limit: number) {
  let free = limit;
  const queue: (() => void)[] = [];
  const release = () => {
    const next = queue.shift();
    if (next) next();
    else free += 1;
  };
  return {
    async acquire(signal: AbortSignal, whileWaiting: () => void): Promise<() => void> {
      if (free > 0) {
        free -= 1;
        return once(release);
      }
      await new Promise<void>((resolve, reject) => {
        const timer = setInterval(whileWaiting, 10_000);
        const grant = () => {
          clearInterval(timer);
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = () => {
          clearInterval(timer);
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
