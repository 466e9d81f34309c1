import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { CrsError } from '../errors.ts';
import { type Logger, redactText } from '../log.ts';
import { dbFailureKind } from './db-errors.ts';
import type { Database } from './types.ts';

// `date` as its 'YYYY-MM-DD' text (a JS Date would shift it by the local zone), bigint as a
// number (counts and line numbers stay far below 2^53).
pg.types.setTypeParser(pg.types.builtins.DATE, (v) => v);
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

// 54 characters at most: its internal schema (`_internal` after it) is an identifier too.
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,53}$/;

export interface Warehouse {
  readonly db: Kysely<Database>;
  /** The raw pool, for the loader's hot path (hand-built, prepared batch statements). */
  readonly pool: pg.Pool;
  readonly schema: string;
  /** What the pool was opened with (a migration opens a pool of its own from it). */
  readonly options: Readonly<WarehouseOptions>;
  close(): Promise<void>;
}

/**
 * Server-side bounds of every session, in ms (0: none). A statement, lock wait or transaction
 * left open beyond them is ended by the server with an error the connector retries (see
 * db-errors.ts), instead of holding a day load for hours. The defaults are far above anything a
 * legitimate load needs (its batches take milliseconds, a 1M-row day's finalize under a minute)
 * and equal those of src/config.ts.
 */
export interface DbTimeouts {
  statementMs: number;
  lockMs: number;
  idleTxMs: number;
  /** statement_timeout and lock_timeout of a migration, which may rewrite a big table. */
  migrationMs: number;
  /** Idle time before TCP keepalive probes start, so a silently dead server is noticed. */
  keepAliveMs: number;
}

export const DEFAULT_DB_TIMEOUTS: Readonly<DbTimeouts> = Object.freeze({
  statementMs: 600_000,
  lockMs: 120_000,
  idleTxMs: 300_000,
  migrationMs: 3_600_000,
  keepAliveMs: 30_000,
});

export interface WarehouseOptions {
  url: string;
  schema: string;
  /** Pool size: the loader's parallel connections plus a few for bookkeeping. */
  max?: number;
  applicationName?: string;
  timeouts?: Partial<DbTimeouts>;
  /** Where connection errors of pooled clients are reported (warn); silent without one. */
  log?: Logger;
}

/**
 * The server probes the connection too: a worker that vanished without closing its sockets (a
 * network cut, a killed VM) then loses its sessions, and the advisory lock of its load, within
 * about a minute instead of the operating system's two hours, so the retried load is not kept
 * waiting on LOAD_BUSY.
 */
function serverKeepAlive(ms: number): string {
  if (ms <= 0) return '';
  const idle = Math.max(1, Math.ceil(ms / 1000));
  return ` -c tcp_keepalives_idle=${idle} -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3`;
}

/** The schema of the bookkeeping next to the data schema `schema` (migration 2026-11-28T21-00-00). */
export const internalSchema = (schema: string): string => `${schema}_internal`;

/**
 * Every connection runs with search_path = the configured schema, then its internal schema (the
 * bookkeeping: docs/privacy.md), so queries and migrations use unqualified table names and any
 * schema name works without rewriting SQL. A role without access to the internal schema (a
 * reader) simply does not see what is in it.
 */
export function openWarehouse(opts: WarehouseOptions): Warehouse {
  if (!IDENTIFIER.test(opts.schema)) {
    throw new CrsError('CONFIG_INVALID', `CRS_SCHEMA: "${opts.schema}" is not a plain lower-case identifier`);
  }
  const t = { ...DEFAULT_DB_TIMEOUTS, ...opts.timeouts };
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.max ?? 8,
    options: `-c search_path=${opts.schema},${internalSchema(opts.schema)},public${serverKeepAlive(t.keepAliveMs)}`,
    application_name: opts.applicationName ?? 'crs-sync',
    connectionTimeoutMillis: 10_000,
    // pg sends only the non-zero ones; 0 leaves the server's own setting.
    statement_timeout: t.statementMs || undefined,
    lock_timeout: t.lockMs || undefined,
    idle_in_transaction_session_timeout: t.idleTxMs || undefined,
    keepAlive: t.keepAliveMs > 0,
    keepAliveInitialDelayMillis: t.keepAliveMs,
  });
  // A client's connection can die at any moment (pg_terminate_backend, restart, failover), and
  // pg then emits 'error' on the client. The pool listens only while a client is idle: one
  // checked out (a loader partition, a lock holder) would crash the process with an unhandled
  // 'error'. So every client gets a listener for its whole life; the query in flight rejects on
  // its own, the holder fails retryably, and pg-pool discards the broken client on release.
  pool.on('connect', (client) => {
    // pg reports a killed session twice (the server's FATAL, then the closed socket): once is news.
    let reported = false;
    client.on('error', (err: Error) => {
      if (reported) return;
      reported = true;
      opts.log?.warn(
        { code: (err as { code?: unknown }).code, kind: dbFailureKind(err), error: redactText(err.message) },
        'a warehouse connection failed; its work fails and is retried',
      );
    });
  });
  // The idle clients' errors reach the pool too: the listener above has logged them.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    pool,
    schema: opts.schema,
    options: { ...opts },
    close: async () => {
      await db.destroy();
      // kysely ends the pool only if it used it; the loader's raw queries leave idle sockets that
      // would keep the process alive until pg's idle timeout.
      if (!pool.ended) await pool.end();
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
