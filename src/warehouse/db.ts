import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { CrsError } from '../errors.ts';
import type { Database } from './types.ts';

// `date` as its 'YYYY-MM-DD' text (a JS Date would shift it by the local zone), bigint as a
// number (counts and line numbers stay far below 2^53).
pg.types.setTypeParser(pg.types.builtins.DATE, (v) => v);
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

export interface Warehouse {
  readonly db: Kysely<Database>;
  /** The raw pool, for the loader's hot path (hand-built, prepared batch statements). */
  readonly pool: pg.Pool;
  readonly schema: string;
  close(): Promise<void>;
}

export interface WarehouseOptions {
  url: string;
  schema: string;
  /** Pool size: the loader's parallel connections plus a few for bookkeeping. */
  max?: number;
  applicationName?: string;
}

/**
 * Every connection runs with search_path = the configured schema, so queries and migrations use
 * unqualified table names and any schema name works without rewriting SQL.
 */
export function openWarehouse(opts: WarehouseOptions): Warehouse {
  if (!IDENTIFIER.test(opts.schema)) {
    throw new CrsError('CONFIG_INVALID', `CRS_SCHEMA: "${opts.schema}" is not a plain lower-case identifier`);
  }
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.max ?? 8,
    options: `-c search_path=${opts.schema},public`,
    application_name: opts.applicationName ?? 'crs-sync',
    connectionTimeoutMillis: 10_000,
  });
  // An idle client that errors (server restart) must not crash the process; the next query
  // reports the problem.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    pool,
    schema: opts.schema,
    close: async () => {
      await db.destroy();
    },
  };
}

/** Checks that the database answers, turning connection failures into one clear error. */
export async function checkConnection(w: Warehouse): Promise<void> {
  try {
    await w.pool.query('select 1');
  } catch (err) {
    throw new CrsError('DB_UNAVAILABLE', `cannot reach the warehouse database: ${(err as Error).message}`, {
      retryable: true,
      cause: err,
    });
  }
}
