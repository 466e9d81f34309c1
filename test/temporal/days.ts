import { randomInt } from 'node:crypto';
import { shiftDay } from '../../src/common/civil-date.ts';

/**
 * Day workflow ids are global in the namespace the test files share, so every test picks its
 * days in a random stretch of the past where no other test is likely to land.
 */
export function randomDays(n: number): string[] {
  const start = shiftDay('1900-01-01', randomInt(0, 60_000));
  return Array.from({ length: n }, (_, i) => shiftDay(start, i));
}

export async function until<T>(
  probe: () => Promise<T | undefined | false>,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
