import { defineConfig } from 'vitest/config';
import { INTEGRATION, SYSTEM } from './test/tiers.ts';

// Three tiers (test/tiers.ts lists the files of the last two; every other test file is a unit
// test). `npm test` runs all three; `npm run test:unit|test:integration|test:system` one.
const ALL = ['test/**/*.test.ts'];
const EXCLUDE = ['**/node_modules/**', '**/.git/**'];

export default defineConfig({
  test: {
    // The Temporal SDK has crashed under worker threads; child processes are safe.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
    // groupOrder: the unit tier first (quickest to fail), the system tier last.
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ALL,
          exclude: [...EXCLUDE, ...INTEGRATION, ...SYSTEM],
          provide: { tier: 'unit' },
          sequence: { groupOrder: 0 },
          setupFiles: ['test/setup/tier-guard.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: [...INTEGRATION],
          provide: { tier: 'integration' },
          sequence: { groupOrder: 1 },
          globalSetup: ['test/setup/postgres.ts'],
          setupFiles: ['test/setup/tier-guard.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'system',
          include: [...SYSTEM],
          provide: { tier: 'system' },
          globalSetup: ['test/setup/postgres.ts', 'test/setup/temporal.ts'],
          // Dev server, worker processes, clusters and a browser each: one file at a time.
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
