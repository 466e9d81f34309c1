import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  chooseTestDatabase,
  LOCAL_TEST_DATABASE,
  testDatabaseCandidates,
  testDatabaseUrl,
} from '../helpers/test-database.ts';

/**
 * Tests make schemas of their own and drop them; a shell whose DATABASE_URL names a real
 * warehouse must never receive them. The test database is TEST_DATABASE_URL, else the local
 * default (else, in the test run, an embedded PostgreSQL), and DATABASE_URL is never read.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const WAREHOUSE = 'postgres://crs:secret@warehouse.example:5432/crs';

describe('the test database', () => {
  it('when DATABASE_URL names a warehouse that answers and TEST_DATABASE_URL is unset, then the tests use the local default, and never ask the warehouse', async () => {
    const asked: string[] = [];
    const url = await chooseTestDatabase(
      async (u) => {
        asked.push(u);
        return true;
      },
      { DATABASE_URL: WAREHOUSE },
    );
    expect(url).toBe(LOCAL_TEST_DATABASE);
    expect(asked).not.toContain(WAREHOUSE);
    expect(testDatabaseCandidates({ DATABASE_URL: WAREHOUSE })).toEqual([LOCAL_TEST_DATABASE]);
    expect(testDatabaseUrl({ DATABASE_URL: WAREHOUSE })).toBe(LOCAL_TEST_DATABASE);
  });

  it('when only the local default fails to answer, then there is no database to use (the run starts an embedded one), not DATABASE_URL', async () => {
    const url = await chooseTestDatabase(async (u) => u === WAREHOUSE, { DATABASE_URL: WAREHOUSE });
    expect(url).toBeUndefined();
  });

  it('when TEST_DATABASE_URL is set, then it comes first, before the local default', async () => {
    const given = 'postgres://postgres@10.0.0.9:5433/ci';
    const env = { TEST_DATABASE_URL: given, DATABASE_URL: WAREHOUSE };
    expect(await chooseTestDatabase(async () => true, env)).toBe(given);
    expect(await chooseTestDatabase(async (u) => u !== given, env)).toBe(LOCAL_TEST_DATABASE);
    expect(testDatabaseUrl(env)).toBe(given);
  });

  it('when the code that makes test schemas (global setup, helpers, fuzz scripts) is read, then none of it reads DATABASE_URL', () => {
    const dirs = ['test/setup', 'test/helpers', 'test/ingest/fuzz', 'test/api/helpers'];
    const files = dirs.flatMap((d) =>
      readdirSync(path.join(ROOT, d))
        .filter((f) => f.endsWith('.ts'))
        .map((f) => `${d}/${f}`),
    );
    expect(files).toContain('test/setup/postgres.ts');
    const reads = files.filter((f) =>
      /env\.DATABASE_URL\b|env\[['"]DATABASE_URL['"]\]/.test(readFileSync(path.join(ROOT, f), 'utf8')),
    );
    expect(reads, 'these read DATABASE_URL: use test/helpers/test-database.ts').toEqual([]);
  });
});
