import { inject } from 'vitest';

/**
 * A service the test run's global setup provides, or a clear error naming the tier that lacks
 * it (test/tiers.ts lists which files run where).
 */
export function provided<K extends 'databaseUrl' | 'temporalAddress'>(key: K): string {
  const value = inject(key);
  if (typeof value === 'string' && value !== '') return value;
  const what = key === 'databaseUrl' ? 'PostgreSQL' : 'Temporal dev server';
  const move = key === 'databaseUrl' ? 'INTEGRATION (PostgreSQL only) or SYSTEM' : 'SYSTEM';
  throw new Error(
    `test tier "${inject('tier') ?? 'unknown'}" has no ${what}: list this file under ${move} in test/tiers.ts.`,
  );
}
