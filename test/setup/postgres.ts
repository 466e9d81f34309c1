import type { TestProject } from 'vitest/node';
import { type EmbeddedWarehouse, startEmbeddedPostgres } from '../../src/warehouse/embedded.ts';
import { chooseTestDatabase, databaseAnswers } from '../helpers/test-database.ts';

/**
 * One Postgres for the whole test run: TEST_DATABASE_URL, else the local server at
 * 127.0.0.1:5432 when it answers, else an embedded PostgreSQL started here; never DATABASE_URL
 * (test/helpers/test-database.ts says why). Each test file then works in a schema of its own (see
 * test/helpers/warehouse.ts). The integration and system tiers both list this setup: the first
 * to start takes the server, the other shares it, and the last to finish stops an embedded one.
 */
declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
  }
}

async function start(): Promise<{ url: string; embedded?: EmbeddedWarehouse }> {
  const url = await chooseTestDatabase(databaseAnswers);
  if (url) return { url };
  const embedded = await startEmbeddedPostgres({
    dir: `${process.cwd()}/.data/test-postgres`,
    persistent: false,
    unsafeNoFsync: true,
  });
  return { url: embedded.url, embedded };
}

// Kept on globalThis: each project may load this module anew, but all run in vitest's process.
interface Shared {
  server?: Promise<{ url: string; embedded?: EmbeddedWarehouse }>;
  users: number;
}
const KEY = Symbol.for('crs-sync.test-postgres');
const scope = globalThis as Record<symbol, Shared | undefined>;
scope[KEY] ??= { users: 0 };
const state = scope[KEY];

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  state.server ??= start();
  state.users++;
  project.provide('databaseUrl', (await state.server).url);
  return async () => {
    if (--state.users > 0 || !state.server) return;
    const { embedded } = await state.server;
    state.server = undefined;
    await embedded?.stop();
  };
}
