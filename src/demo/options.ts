import { CrsError } from '../errors.ts';

/** What `crs-sync demo` was asked to do, checked (bad values are usage errors: exit 2). */
export interface DemoOptions {
  days: number;
  recordsPerDay: number;
  seed: number;
  keep: boolean;
  json: boolean;
  /** A Temporal server to use instead of starting a dev server (host:port). */
  temporalAddress: string | undefined;
  /** Days loaded at once by the backfill. */
  concurrency: number;
}

export interface RawDemoOptions {
  days: string;
  recordsPerDay: string;
  seed: string;
  keep?: boolean;
  json?: boolean;
  temporalAddress?: string;
  concurrency: string;
}

export const DEMO_DEFAULTS = {
  days: 30,
  // ~3,000 export records over 30 days, ~700 threads to enrich: a minute or two on two cores.
  recordsPerDay: 100,
  seed: 42,
  concurrency: 4,
} as const;

function int(name: string, v: string, min: number, max: number): number {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || n < min || n > max) {
    throw new CrsError('USAGE', `--${name}: "${v}" must be a whole number from ${min} to ${max}`);
  }
  return n;
}

export function parseDemoOptions(o: RawDemoOptions): DemoOptions {
  const address = o.temporalAddress?.trim();
  if (address !== undefined && !/^[^\s:/]+:\d{1,5}$/.test(address)) {
    throw new CrsError('USAGE', `--temporal-address: "${o.temporalAddress}" is not host:port`);
  }
  return {
    days: int('days', o.days, 1, 366),
    recordsPerDay: int('records-per-day', o.recordsPerDay, 1, 1_000_000),
    seed: int('seed', o.seed, 0, 4_294_967_295),
    keep: o.keep === true,
    json: o.json === true,
    temporalAddress: address || undefined,
    concurrency: int('concurrency', o.concurrency, 1, 32),
  };
}

/** The backfill window: the `days` whole UTC days that end yesterday. */
export function demoWindow(days: number, now: Date): { from: string; to: string } {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const day = (offset: number) => new Date(today + offset * 86_400_000).toISOString().slice(0, 10);
  return { from: day(-days), to: day(-1) };
}

/** The simulator's data set for these options (the demo test rebuilds it to know what to expect). */
export function demoDataset(o: Pick<DemoOptions, 'days' | 'recordsPerDay' | 'seed'>) {
  return {
    seed: o.seed,
    days: o.days,
    recordsPerDay: o.recordsPerDay,
    // Fewer users than the simulator's default, so a user's activity spans several days.
    users: Math.max(20, Math.round(o.recordsPerDay / 2)),
  };
}
