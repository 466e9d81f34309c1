import pg from 'pg';

/**
 * Where tests, the fuzz scripts and the test helpers' measurements make their schemas:
 * `TEST_DATABASE_URL`, else the local server at 127.0.0.1:5432 (database `test`), else (the test
 * run's global setup only) an embedded PostgreSQL. Never `DATABASE_URL`: that names the warehouse
 * the shell works on, possibly a real one, which must never receive test schemas.
 */
export const LOCAL_TEST_DATABASE = 'postgres://postgres@127.0.0.1:5432/test';

/** The servers to try, in order. `DATABASE_URL` is ignored on purpose (see above). */
export function testDatabaseCandidates(env: NodeJS.ProcessEnv = process.env): string[] {
  const given = env.TEST_DATABASE_URL;
  return given ? [given, LOCAL_TEST_DATABASE] : [LOCAL_TEST_DATABASE];
}

/** The first candidate that answers, or undefined when none does. */
export async function chooseTestDatabase(
  answers: (url: string) => Promise<boolean>,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string | undefined> {
  for (const url of testDatabaseCandidates(env)) if (await answers(url)) return url;
  return undefined;
}

/** For scripts with no embedded fallback: the one URL they use. */
export function testDatabaseUrl(env: NodeJS.ProcessEnv = process.env): string {
  return env.TEST_DATABASE_URL || LOCAL_TEST_DATABASE;
}

/** Whether a PostgreSQL answers at `url` within 2 s (a `select 1`). */
export async function databaseAnswers(url: string): Promise<boolean> {
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
