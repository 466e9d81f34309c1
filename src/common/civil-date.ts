/**
 * The civil calendar of the project: UTC days as 'YYYY-MM-DD' text, the form the export, the
 * ledger, the CLI's options and the dashboard's addresses all use, and their day numbers (days
 * since 1970-01-01, proleptic Gregorian). Every rule about days goes through here: what a day is
 * (a real calendar date of years 0001-9999, the calendar PostgreSQL's `date` and a four-digit
 * year share), the day before or after, the days of a range, the UTC day of an instant.
 *
 * Pure and without Date.now(), so workflow code imports it too (the worker bundles it into the
 * workflow sandbox, and replays must compute the same days); the time is always the caller's.
 * Day numbers come from Howard Hinnant's days_from_civil / civil_from_days
 * (https://howardhinnant.github.io/date_algorithms.html): exact for any year, no Date, cheap enough
 * for the export's time parser, the binary COPY encoder and the simulator's time rendering.
 */

/** The first and last day of the calendar a day may name. */
export const FIRST_DAY = '0001-01-01';
export const LAST_DAY = '9999-12-31';

const MS_PER_DAY = 86_400_000;

/** The day number of year `y`, month `m` (1-12), day `d` (1-31); no range check. */
export function daysFromCivil(y: number, m: number, d: number): number {
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

/** The [year, month (1-12), day (1-31)] of day number `z`. */
export function civilFromDays(z: number): [number, number, number] {
  const zz = z + 719468;
  const era = Math.floor(zz / 146097);
  const doe = zz - era * 146097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  return [m <= 2 ? yoe + era * 400 + 1 : yoe + era * 400, m, d];
}

export function isLeapYear(y: number): boolean {
  return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
}

export function daysInMonth(y: number, m: number): number {
  if (m === 2) return isLeapYear(y) ? 29 : 28;
  return m === 4 || m === 6 || m === 9 || m === 11 ? 30 : 31;
}

const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

/**
 * Why a text is not a day: `shape` (not YYYY-MM-DD), `calendar` (2026-02-30, month 13),
 * `year` (a calendar date, of year 0000, before the first day there is).
 */
export type DayProblem = 'shape' | 'calendar' | 'year';

export type DayCheck = { ok: true; dayNumber: number } | { ok: false; problem: DayProblem; reason: string };

const digit = (s: string, i: number): number => {
  const c = s.charCodeAt(i) - 48;
  return c >= 0 && c <= 9 ? c : -1;
};

/** The day number of a 'YYYY-MM-DD' text that is a date of the calendar, any year 0000-9999. */
function calendarDay(s: string): DayCheck {
  const ds = [0, 1, 2, 3, 5, 6, 8, 9].map((i) => digit(s, i));
  if (s.length !== 10 || s[4] !== '-' || s[7] !== '-' || ds.some((x) => x < 0)) {
    return { ok: false, problem: 'shape', reason: `"${s}" is not in the form YYYY-MM-DD` };
  }
  const [y0 = 0, y1 = 0, y2 = 0, y3 = 0, m0 = 0, m1 = 0, d0 = 0, d1 = 0] = ds;
  const y = y0 * 1000 + y1 * 100 + y2 * 10 + y3;
  const m = m0 * 10 + m1;
  const d = d0 * 10 + d1;
  if (m < 1 || m > 12)
    return { ok: false, problem: 'calendar', reason: `month ${s.slice(5, 7)} does not exist` };
  const last = daysInMonth(y, m);
  if (d < 1 || d > last) {
    const reason = `${s} is not in the calendar: ${MONTHS[m - 1]} ${s.slice(0, 4)} has ${last} days`;
    return { ok: false, problem: 'calendar', reason };
  }
  return { ok: true, dayNumber: daysFromCivil(y, m, d) };
}

/** Whether `s` is a day, and its day number; or what is wrong with it, in words. */
export function checkDay(s: string): DayCheck {
  const c = calendarDay(s);
  if (c.ok && s < FIRST_DAY) {
    return { ok: false, problem: 'year', reason: `year 0000 does not exist (${FIRST_DAY} is the first day)` };
  }
  return c;
}

/** A real calendar day in the form YYYY-MM-DD of years 0001-9999 (2026-02-30 is not one). */
export function isDay(s: string): boolean {
  return checkDay(s).ok;
}

/** The day number of a day, or null when `s` is not one. */
export function parseDay(s: string): number | null {
  const c = checkDay(s);
  return c.ok ? c.dayNumber : null;
}

const pad = (n: number, width: number): string => String(n).padStart(width, '0');

/**
 * The 'YYYY-MM-DD' text of a day number. Past the four-digit years (arithmetic near the calendar's
 * ends), the extended ±YYYYYY form of Date#toISOString, which no day check accepts.
 */
export function formatDay(z: number): string {
  const [y, m, d] = civilFromDays(z);
  const year = y >= 0 && y <= 9999 ? pad(y, 4) : `${y < 0 ? '-' : '+'}${pad(Math.abs(y), 6)}`;
  return `${year}-${pad(m, 2)}-${pad(d, 2)}`;
}

/** The day number of a day that callers have already checked; a text that is not one is a bug. */
function dayNumberOf(day: string): number {
  const c = calendarDay(day);
  if (!c.ok) throw new RangeError(`not a day: ${c.reason}`);
  return c.dayNumber;
}

/** The day `n` days after `day` (before it for a negative `n`). */
export function shiftDay(day: string, n: number): string {
  return formatDay(dayNumberOf(day) + n);
}

/** How many days `from` … `to` holds, both included (0 or less when `from` is after `to`). */
export function dayCount(from: string, to: string): number {
  return dayNumberOf(to) - dayNumberOf(from) + 1;
}

/** The days from `from` to `to`, both included; empty when `from` is after `to`. */
export function dayRange(from: string, to: string): string[] {
  const a = dayNumberOf(from);
  const b = dayNumberOf(to);
  const out: string[] = [];
  for (let z = a; z <= b; z++) out.push(formatDay(z));
  return out;
}

/** The UTC day of an instant (a Date or epoch milliseconds), which the caller supplies. */
export function utcDay(instant: Date | number): string {
  const ms = typeof instant === 'number' ? instant : instant.getTime();
  if (!Number.isFinite(ms)) throw new RangeError('not an instant: Invalid Date');
  return formatDay(Math.floor(ms / MS_PER_DAY));
}
