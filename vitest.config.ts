import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { SystemFirstSequencer } from './test/setup/sequencer.ts';
import { INTEGRATION, SYSTEM } from './test/tiers.ts';

// Three tiers (test/tiers.ts lists the files of the last two; every other test file is a unit
// test). `npm test` (scripts/test.ts) runs all three: the system tier in one vitest process, the
// other two in another beside it; `npm run test:unit|test:integration|test:system` one; `npx
// vitest run` all three in one process, the system tier after the others (groupOrder, below).
const ALL = ['test/**/*.test.ts'];
const EXCLUDE = ['**/node_modules/**', '**/.git/**'];
// Unit and integration files mostly wait (on PostgreSQL, on the simulator over HTTP), so two run
// at a time even on 2 cores, where vitest's default (cores - 1) would run one. vitest runs one
// group (sequence.groupOrder) at a time and wants one worker count per group: the two tiers share
// group 0 and this count. Alone with one worker and group 0, the unit tier would be put after
// every other group (vitest's rule for a sequential project without a groupOrder).
// CRS_TEST_WORKERS overrides it: `npm test` leaves the system tier, which runs beside these two
// tiers, a core of its own (scripts/test.ts).
const WORKERS = Number(process.env.CRS_TEST_WORKERS) || Math.max(2, availableParallelism() - 1);

export default defineConfig({
  test: {
    // The Temporal SDK has crashed under worker threads; child processes are safe.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
    // The system files that share the CPU best with the other tiers first (test/setup/sequencer.ts).
    sequence: { sequencer: SystemFirstSequencer },
    // groupOrder, in one process: the unit and integration tiers together (the unit files,
    // shorter, mostly end first), then the system tier.
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ALL,
          exclude: [...EXCLUDE, ...INTEGRATION, ...SYSTEM],
          provide: { tier: 'unit' },
          maxWorkers: WORKERS,
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
          maxWorkers: WORKERS,
          sequence: { groupOrder: 0 },
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
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
