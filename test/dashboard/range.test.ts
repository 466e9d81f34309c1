import { describe, expect, it } from 'vitest';
import { clampToData, isDay, presets, resolveRange, shiftDay } from '../../src/dashboard/range.ts';

const NOW = new Date('2026-11-24T07:00:00Z');
const extent = { firstDay: '2026-01-10', lastDay: '2026-11-20' };
const params = (s: string) => new URLSearchParams(s);

describe('the dashboard date range', () => {
  it('when the address has no range, then it is the 30 days that end on the last export day', () => {
    expect(resolveRange(params(''), extent, NOW)).toEqual({
      ok: true,
      range: { from: '2026-10-22', to: '2026-11-20' },
      explicit: false,
    });
  });

  it('when the warehouse has no rows, then the default range ends yesterday (UTC)', () => {
    expect(resolveRange(params(''), { firstDay: null, lastDay: null }, NOW)).toMatchObject({
      range: { from: '2026-10-25', to: '2026-11-23' },
    });
  });

  it('when only one bound is given, then the other is 30 days away from it', () => {
    expect(resolveRange(params('from=2026-02-01'), extent, NOW)).toMatchObject({
      range: { from: '2026-02-01', to: '2026-03-02' },
      explicit: true,
    });
    expect(resolveRange(params('to=2026-03-01'), extent, NOW)).toMatchObject({
      range: { from: '2026-01-31', to: '2026-03-01' },
    });
  });

  it('when a bound is not a calendar day or the bounds are reversed, then it is an error that says which', () => {
    expect(resolveRange(params('from=2026-02-30'), extent, NOW)).toEqual({
      ok: false,
      error: 'from="2026-02-30" is not a day in the form YYYY-MM-DD',
    });
    expect(resolveRange(params('to=yesterday'), extent, NOW)).toMatchObject({ ok: false });
    expect(resolveRange(params('from=2026-03-02&to=2026-03-01'), extent, NOW)).toEqual({
      ok: false,
      error: 'from (2026-03-02) is after to (2026-03-01)',
    });
  });

  it('when days are shifted across a month, a leap day and a year, then they are calendar days in UTC', () => {
    expect(shiftDay('2028-02-28', 1)).toBe('2028-02-29');
    expect(shiftDay('2026-12-31', 1)).toBe('2027-01-01');
    expect(shiftDay('2026-03-01', -1)).toBe('2026-02-28');
    expect(isDay('2028-02-29')).toBe(true);
    expect(isDay('2026-02-29')).toBe(false);
    expect(isDay('2026-1-01')).toBe(false);
  });

  it('when presets are offered, then they end on the last export day and "all" spans the data', () => {
    expect(presets(extent, NOW).map((p) => [p.label, p.range.from, p.range.to])).toEqual([
      ['last 7 days', '2026-11-14', '2026-11-20'],
      ['last 30 days', '2026-10-22', '2026-11-20'],
      ['last 90 days', '2026-08-23', '2026-11-20'],
      ['all', '2026-01-10', '2026-11-20'],
    ]);
  });

  it('when a range reaches past the data, then its queries read only the days the data spans, and a range without data one empty day', () => {
    expect(clampToData({ from: '0001-01-01', to: '9999-12-31' }, extent)).toEqual({
      from: '2026-01-10',
      to: '2026-11-20',
    });
    expect(clampToData({ from: '2026-02-01', to: '9999-12-31' }, extent)).toEqual({
      from: '2026-02-01',
      to: '2026-11-20',
    });
    expect(clampToData({ from: '9000-01-01', to: '9999-12-31' }, extent)).toEqual({
      from: '9000-01-01',
      to: '9000-01-01',
    });
    expect(clampToData({ from: '2026-02-01', to: '2026-02-07' }, { firstDay: null, lastDay: null })).toEqual({
      from: '2026-02-01',
      to: '2026-02-01',
    });
  });

  it('when a bound lies outside the calendar or one bound alone would run past it, then it is an error that says so', () => {
    expect(resolveRange(params('from=0000-12-31&to=2026-01-01'), extent, NOW)).toEqual({
      ok: false,
      error: 'from="0000-12-31" is before 0001-01-01, the first day there is',
    });
    expect(resolveRange(params('from=9999-12-31'), extent, NOW)).toMatchObject({ ok: false });
    expect(resolveRange(params('to=0001-01-05'), extent, NOW)).toMatchObject({ ok: false });
    expect(resolveRange(params('from=0001-01-01&to=9999-12-31'), extent, NOW)).toMatchObject({
      ok: true,
      range: { from: '0001-01-01', to: '9999-12-31' },
    });
    expect(resolveRange(params('from=9999-12-31&to=9999-12-31'), extent, NOW)).toMatchObject({ ok: true });
  });
});
