import pg from 'pg';

/** Bench bookkeeping on the database (schemas, counts), outside any measured run. */
export async function withDb<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url, application_name: 'crs-bench' });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export function quoteIdent(s: string): string {
  return `"${s.replaceAll('"', '""')}"`;
}

export async function dropSchemas(url: string, schemas: string[]): Promise<void> {
  await withDb(url, async (c) => {
    await c.query('set client_min_messages = warning');
    for (const s of schemas) await c.query(`drop schema if exists ${quoteIdent(s)} cascade`);
  });
}

/** host:port/db of a URL, for printing: never the user or password. */
export function describeUrl(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || 5432}${u.pathname}`;
}
