import { checkDay } from '../common/civil-date.ts';
import { CrsError } from '../errors.ts';

/** Checks a YYYY-MM-DD option: a day of the calendar, or exit 2 saying what is wrong with it. */
export function dayOption(name: string, v: string | undefined): string | undefined {
  return v === undefined ? undefined : checkedDay(name, v);
}

/** A day given to `name`; the same check as dayOption, for an option that is required or repeated. */
export function checkedDay(name: string, v: string): string {
  const c = checkDay(v);
  if (!c.ok) throw new CrsError('USAGE', `${name}: "${v}" is not a date (YYYY-MM-DD): ${c.reason}`);
  return v;
}

export function positiveIntOption(name: string, v: string | undefined, max: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > max) {
    throw new CrsError('USAGE', `${name}: "${v}" must be a whole number from 1 to ${max}`);
  }
  return n;
}

export function checkRange(from: string | undefined, to: string | undefined): void {
  if (from && to && from > to) throw new CrsError('USAGE', `--from ${from} is after --to ${to}`);
}
