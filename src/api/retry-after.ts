/**
 * Parses a Retry-After header (RFC 9110 §10.2.3): either delay-seconds or an HTTP date.
 * Returns milliseconds to wait (never negative), or undefined when absent or unreadable.
 */
export function parseRetryAfter(
  value: string | null | undefined,
  nowMs: number = Date.now(),
): number | undefined {
  if (value === null || value === undefined) return undefined;
  const v = value.trim();
  if (v === '') return undefined;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  // Only HTTP dates (which name a weekday or month), not arbitrary text Date.parse might accept.
  if (!/[A-Za-z]{3}/.test(v)) return undefined;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}
