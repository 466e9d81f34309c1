/**
 * Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff And
 * Jitter"): a uniformly random delay in [0, min(cap, base · 2^attempt)). Full jitter spreads
 * clients that failed together, which matters because they also share the rate budget.
 */
export function fullJitterDelay(
  attempt: number,
  baseMs: number,
  capMs: number,
  random: () => number,
): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** attempt);
  return Math.floor(random() * ceiling);
}

/**
 * The wait before retry number `attempt + 1`: the server's Retry-After when it sent one (capped
 * at `maxRetryAfterMs`), else full-jitter backoff.
 */
export function retryDelay(
  attempt: number,
  retryAfterMs: number | undefined,
  opts: { baseMs: number; capMs: number; maxRetryAfterMs: number; random: () => number },
): number {
  if (retryAfterMs !== undefined) return Math.min(retryAfterMs, opts.maxRetryAfterMs);
  return fullJitterDelay(attempt, opts.baseMs, opts.capMs, opts.random);
}
