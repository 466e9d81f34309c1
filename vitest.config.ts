import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The Temporal SDK has crashed under worker threads; child processes are safe.
    pool: 'forks',
    globalSetup: ['test/setup/postgres.ts', 'test/setup/temporal.ts'],
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
  },
});
