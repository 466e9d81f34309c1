import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { type EmbeddedWarehouse, startEmbeddedPostgres } from '../../src/warehouse/embedded.ts';

/**
 * One Postgres for the whole test run: TEST_DATABASE_URL or DATABASE_URL when set, else the
 * local server at 127.0.0.1:5432 when it answers, else an embedded PostgreSQL started here.
 * Each test file then works in a schema of its own (see test/helpers/warehouse.ts).
 */
declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
  }
}

async function answers(url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    await c.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => {});
  }
}

let embedded: EmbeddedWarehouse | undefined;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const candidates = [
    process.env.TEST_DATABASE_URL,
    process.env.DATABASE_URL,
    'postgres://postgres@127.0.0.1:5432/test',
  ].filter((u): u is string => typeof u === 'string' && u !== '');
  let url: string | undefined;
  for (const c of candidates) {
    if (await answers(c)) {
      url = c;
      break;
    }
  }
  if (!url) {
    embedded = await startEmbeddedPostgres({
      dir: `${process.cwd()}/.data/test-postgres`,
      persistent: false,
      unsafeNoFsync: true,
    });
    url = embedded.url;
  }
  project.provide('databaseUrl', url);
  return async () => {
    await embedded?.stop();
  };
}
