import { describe, expect, it } from 'vitest';
import { civilFromDays, daysFromCivil } from '../../src/common/civil-date.ts';

const DAY_MS = 86_400_000;

describe('civil dates', () => {
  it('when a day number is converted, then it is the date Date gives and converts back (years 1-9999, every 97th day)', () => {
    const d = new Date(0);
    const wrong: string[] = [];
    let checked = 0;
    for (let z = daysFromCivil(1, 1, 1); z <= daysFromCivil(9999, 12, 31); z += 97) {
      d.setTime(z * DAY_MS);
      const [y, m, day] = civilFromDays(z);
      checked++;
      if (y !== d.getUTCFullYear() || m !== d.getUTCMonth() + 1 || day !== d.getUTCDate()) {
        wrong.push(`${z}: ${y}-${m}-${day} vs ${d.toISOString()}`);
      } else if (daysFromCivil(y, m, day) !== z) wrong.push(`${z}: back to ${daysFromCivil(y, m, day)}`);
    }
    expect(checked).toBeGreaterThan(37_000);
    expect(wrong).toEqual([]);
  });

  it('when the days around leap days and the epochs are converted, then they round-trip', () => {
    const cases: [number, number, number, number][] = [
      [1970, 1, 1, 0],
      [2000, 1, 1, 10_957],
      [2000, 2, 29, 11_016],
      [1900, 3, 1, -25_508],
      [1969, 12, 31, -1],
      [2024, 2, 29, 19_782],
    ];
    for (const [y, m, d, z] of cases) {
      expect(daysFromCivil(y, m, d)).toBe(z);
      expect(civilFromDays(z)).toEqual([y, m, d]);
    }
  });
});
