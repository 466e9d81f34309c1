import { civilFromDays, daysFromCivil, daysInMonth } from './civil-date.ts';

/**
 * The export's "Message Time": an RFC 3339 profile of ISO 8601, checked by hand because it runs
 * once per line on the hot path.
 *
 * Accepted: `YYYY-MM-DDTHH:MM:SS[.f+](Z|±hh:mm|±hhmm)`; `t` and `z` in lower case too (RFC 3339),
 * and `,` as the decimal sign (ISO 8601). `-00:00` is taken as UTC.
 * Rejected: no offset (`time_without_offset`); a space instead of `T`, no seconds, `±hh` alone,
 * week or ordinal dates, offsets beyond ±18:00 (`invalid_time`); a day that is not in the
 * calendar (2026-02-30), hour 24, minute 60, second 60, year 0000 (`impossible_date`).
 *
 * Shape and offset are checked before the calendar, so a time that lacks an offset and is also
 * impossible is reported as `time_without_offset`.
 *
 * Second 60: leap seconds are rejected. PostgreSQL would silently turn :60 into the next minute,
 * which breaks both exactness and the UTC-date rule; the export has never been seen to emit one.
 *
 * The result is converted to UTC (`...Z`), with at most 6 fractional digits (PostgreSQL keeps
 * microseconds) truncated, never rounded, so that the stored time can never move to the next
 * day, and trailing zeros removed so that `.5` and `.500` give the same text (and hash).
 */
export type TimeProblem = 'time_without_offset' | 'invalid_time' | 'impossible_date';

export type TimeResult =
  | { ok: true; utc: string; date: string }
  | { ok: false; code: TimeProblem; reason: string };

const MAX_OFFSET_MINUTES = 18 * 60;

function two(s: string, i: number): number {
  const a = s.charCodeAt(i) - 48;
  const b = s.charCodeAt(i + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
}

// Two-digit fields from a table: this runs once per line.
const PAD2: readonly string[] = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0'));
const pad2 = (n: number): string => PAD2[n] ?? String(n).padStart(2, '0');
const pad4 = (n: number): string => String(n).padStart(4, '0');

const SHAPE = 'expected YYYY-MM-DDTHH:MM:SS[.fff](Z|±hh:mm)';

/**
 * Parses one time text (the rules are at the top of this file). Long: one pass over the text, each
 * check in the order of the characters it reads, on the loader's hot path; split, the parts would
 * hand the position and half-read fields back and forth.
 */
export function parseOffsetTime(s: string): TimeResult {
  const n = s.length;
  const century = two(s, 0);
  const yy = two(s, 2);
  const year = century * 100 + yy;
  const month = two(s, 5);
  const day = two(s, 8);
  if (century < 0 || yy < 0 || month < 0 || day < 0 || s[4] !== '-' || s[7] !== '-') {
    return { ok: false, code: 'invalid_time', reason: `not an ISO 8601 date-time, ${SHAPE}` };
  }
  const sep = s[10];
  if (n === 10) return { ok: false, code: 'invalid_time', reason: 'a date without a time' };
  if (sep !== 'T' && sep !== 't') {
    return { ok: false, code: 'invalid_time', reason: `date and time must be separated by "T", ${SHAPE}` };
  }
  const hour = two(s, 11);
  const minute = two(s, 14);
  const second = n >= 19 ? two(s, 17) : -1;
  if (hour < 0 || minute < 0 || s[13] !== ':') {
    return { ok: false, code: 'invalid_time', reason: `not an ISO 8601 date-time, ${SHAPE}` };
  }
  if (s[16] !== ':' || second < 0) {
    return { ok: false, code: 'invalid_time', reason: `seconds are required, ${SHAPE}` };
  }

  let i = 19;
  let frac = '';
  if (s[i] === '.' || s[i] === ',') {
    const start = i + 1;
    i = start;
    while (i < n) {
      const c = s.charCodeAt(i);
      if (c < 48 || c > 57) break;
      i++;
    }
    if (i === start) return { ok: false, code: 'invalid_time', reason: 'no digits after the decimal point' };
    let digits = s.slice(start, Math.min(i, start + 6));
    let end = digits.length;
    while (end > 0 && digits.charCodeAt(end - 1) === 48) end--;
    digits = digits.slice(0, end);
    frac = digits === '' ? '' : '.' + digits;
  }

  let offset = 0; // minutes east of UTC
  if (i === n) return { ok: false, code: 'time_without_offset', reason: 'no UTC offset (Z or ±hh:mm)' };
  const o = s[i];
  if ((o === 'Z' || o === 'z') && i + 1 === n) {
    offset = 0;
  } else if (o === '+' || o === '-') {
    const rest = n - i - 1;
    const oh = two(s, i + 1);
    const om = rest === 5 && s[i + 3] === ':' ? two(s, i + 4) : rest === 4 ? two(s, i + 3) : -1;
    if (oh < 0 || om < 0) {
      return { ok: false, code: 'invalid_time', reason: 'the UTC offset must be Z, ±hh:mm or ±hhmm' };
    }
    if (om > 59 || oh * 60 + om > MAX_OFFSET_MINUTES) {
      return { ok: false, code: 'invalid_time', reason: 'the UTC offset is out of range (beyond ±18:00)' };
    }
    offset = (o === '-' ? -1 : 1) * (oh * 60 + om);
  } else {
    return { ok: false, code: 'invalid_time', reason: `unexpected text after the time, ${SHAPE}` };
  }

  if (year === 0) return { ok: false, code: 'impossible_date', reason: 'year 0000 does not exist' };
  if (month < 1 || month > 12)
    return { ok: false, code: 'impossible_date', reason: `month ${month} does not exist` };
  if (day < 1 || day > daysInMonth(year, month)) {
    return { ok: false, code: 'impossible_date', reason: `${s.slice(0, 10)} is not a calendar date` };
  }
  if (hour > 23) return { ok: false, code: 'impossible_date', reason: `hour ${hour} does not exist (00-23)` };
  if (minute > 59)
    return { ok: false, code: 'impossible_date', reason: `minute ${minute} does not exist (00-59)` };
  if (second === 60) {
    return { ok: false, code: 'impossible_date', reason: 'second 60 (a leap second) is not accepted' };
  }
  if (second > 59)
    return { ok: false, code: 'impossible_date', reason: `second ${second} does not exist (00-59)` };

  let days = daysFromCivil(year, month, day);
  let minuteOfDay = hour * 60 + minute;
  if (offset !== 0) {
    minuteOfDay -= offset;
    const shift = Math.floor(minuteOfDay / 1440);
    days += shift;
    minuteOfDay -= shift * 1440;
  }
  const [uy, um, ud] = offset === 0 ? [year, month, day] : civilFromDays(days);
  if (uy < 1 || uy > 9999) {
    return {
      ok: false,
      code: 'invalid_time',
      reason: 'out of range after conversion to UTC (years 0001-9999)',
    };
  }
  const date = `${pad4(uy)}-${pad2(um)}-${pad2(ud)}`;
  const utc = `${date}T${pad2(Math.floor(minuteOfDay / 60))}:${pad2(minuteOfDay % 60)}:${pad2(second)}${frac}Z`;
  return { ok: true, utc, date };
}

/**
 * The best-effort UTC day of a time text, for the `day` of a quarantined line: the UTC date of a
 * valid time, else the text's leading `YYYY-MM-DD` when that is a date of the calendar (PostgreSQL
 * refuses 2026-02-30 and year 0000, and would fail the batch that stores it), else null.
 */
export function dayOfTimeText(s: string): string | null {
  const t = parseOffsetTime(s);
  if (t.ok) return t.date;
  const year = two(s, 0) * 100 + two(s, 2);
  const month = two(s, 5);
  const day = two(s, 8);
  if (two(s, 0) < 0 || two(s, 2) < 0 || s[4] !== '-' || s[7] !== '-' || year < 1) return null;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return null;
  return s.slice(0, 10);
}
