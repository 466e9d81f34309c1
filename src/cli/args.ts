import { isDay } from '../../workflows/dates.ts';
import { CrsError } from '../errors.ts';

/** Checks a YYYY-MM-DD option (exit 2 on a bad one). */
export function dayOption(name: string, v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (!isDay(v)) throw new CrsError('USAGE', `${name}: "${v}" is not a date (YYYY-MM-DD)`);
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
