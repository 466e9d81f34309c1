/**
 * Runs `fn` over items with at most `limit` in flight, in order. `stop` is asked before each new
 * item (a run that should continue as new stops taking work and lets the rest drain).
 * Deterministic: lanes take items in a fixed order driven only by workflow events.
 */
export async function runBounded<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<void>,
  stop: () => boolean = () => false,
): Promise<number> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length && !stop()) {
      const i = next++;
      await fn(items[i] as T, i);
    }
  };
  const lanes = Math.max(1, Math.min(limit, items.length));
  await Promise.all(Array.from({ length: lanes }, lane));
  return next;
}

export function chunk<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
