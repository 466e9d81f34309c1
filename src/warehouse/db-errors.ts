import { CrsError, type ErrorCode, errorMessage, isCrsError } from '../errors.ts';

/**
 * What kind of database failure an error is, for deciding whether trying again can help. One
 * function for the whole connector (loader, finalize, enrichment, the activities' failure
 * mapping), so that a dropped connection is retried the same way wherever it hits.
 *
 * - `connection`: the session is gone or could not be had (failover, restart, terminated backend,
 *   network cut, server full). pg reports most of these without a SQLSTATE, as a plain Error
 *   ("Connection terminated unexpectedly") or a Node socket error (ECONNRESET, …).
 * - `timeout`: the server cancelled a statement (statement_timeout, 57014) or gave up waiting for
 *   a lock (lock_timeout, 55P03). The same statement may well pass on a calmer database, and a
 *   hung one must not be retried in place forever: the attempt fails and Temporal retries it.
 * - `conflict`: serialization failure or deadlock (40001, 40P01): the transaction can simply run
 *   again.
 * Anything else (constraint violations, syntax, data errors) is a bug or bad data: not retryable.
 */
export type DbFailureKind = 'connection' | 'timeout' | 'conflict';

const CONNECTION_SQLSTATES = new Set([
  '57P01', // admin_shutdown (pg_terminate_backend, fast shutdown)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, in recovery)
  '57P05', // idle_session_timeout
  '53300', // too_many_connections
  '25P03', // idle_in_transaction_session_timeout (the server closed the session)
]);

const TIMEOUT_SQLSTATES = new Set(['57014', '55P03']);
const CONFLICT_SQLSTATES = new Set(['40001', '40P01']);

/** Socket errors of Node: the network or the server went away, or is not there yet. */
const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENETRESET',
  'EAI_AGAIN',
]);

/** Messages pg and pg-pool give connection failures that carry no code at all. */
const CONNECTION_MESSAGES = [
  /^Connection terminated/,
  /Client has encountered a connection error and is not queryable/,
  /^timeout exceeded when trying to connect/,
  /^Connection terminated due to connection timeout/,
  /the database system is (starting up|shutting down|in recovery mode)/,
  /server closed the connection unexpectedly/,
];

function codeOf(err: unknown): string | undefined {
  const c = (err as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : undefined;
}

function kindOfOne(err: unknown): DbFailureKind | undefined {
  if (err === null || typeof err !== 'object') return undefined;
  const code = codeOf(err);
  if (code !== undefined) {
    if (code.startsWith('08') && code.length === 5) return 'connection';
    if (CONNECTION_SQLSTATES.has(code)) return 'connection';
    if (TIMEOUT_SQLSTATES.has(code)) return 'timeout';
    if (CONFLICT_SQLSTATES.has(code)) return 'conflict';
    if (NETWORK_CODES.has(code)) return 'connection';
  }
  // Connecting to a host name with several addresses fails with one error per address.
  if (err instanceof AggregateError) {
    for (const e of err.errors) {
      const k = kindOfOne(e);
      if (k) return k;
    }
  }
  const message = err instanceof Error ? err.message : '';
  if (code === undefined && CONNECTION_MESSAGES.some((re) => re.test(message))) return 'connection';
  return undefined;
}

/**
 * The kind of database failure `err` is, looking through the `cause` chain (a CrsError that wraps
 * a pg error); undefined when it is no transient database failure.
 */
export function dbFailureKind(err: unknown): DbFailureKind | undefined {
  const seen = new Set<unknown>();
  for (let e = err; e !== undefined && e !== null && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    const k = kindOfOne(e);
    if (k) return k;
  }
  return undefined;
}

/** Whether running the failed work again can succeed: a connection, timeout or conflict failure. */
export function isRetryableDbError(err: unknown): boolean {
  return dbFailureKind(err) !== undefined;
}

/** What an operator should look at, named by the setting involved. */
function explain(err: unknown, kind: DbFailureKind): string {
  const code = codeOf(err);
  if (kind === 'timeout') {
    // Migrations run under CRS_DB_MIGRATION_TIMEOUT_MS instead of both.
    return code === '55P03'
      ? 'a lock was not granted within CRS_DB_LOCK_TIMEOUT_MS (migrations: CRS_DB_MIGRATION_TIMEOUT_MS); another session holds it'
      : 'a statement ran longer than CRS_DB_STATEMENT_TIMEOUT_MS (migrations: CRS_DB_MIGRATION_TIMEOUT_MS), or was cancelled';
  }
  if (kind === 'conflict') return 'a transaction conflicted with a concurrent one';
  return 'the warehouse connection was lost or refused';
}

/**
 * `err` as the CrsError an activity should fail with: a transient database failure becomes a
 * retryable DB_UNAVAILABLE (connection), DB_TIMEOUT (timeout) or `fallback` (conflict); anything
 * else the non-retryable `fallback`. A CrsError passes unchanged.
 */
export function toDbCrsError(err: unknown, fallback: ErrorCode, what: string): CrsError {
  if (isCrsError(err)) return err;
  const kind = dbFailureKind(err);
  const code = codeOf(err);
  const suffix = code !== undefined ? ` [${code}]` : '';
  if (!kind) return new CrsError(fallback, `${what}: ${errorMessage(err)}${suffix}`, { cause: err });
  const crsCode: ErrorCode =
    kind === 'connection' ? 'DB_UNAVAILABLE' : kind === 'timeout' ? 'DB_TIMEOUT' : fallback;
  return new CrsError(crsCode, `${what}: ${explain(err, kind)}; retrying (${errorMessage(err)}${suffix})`, {
    retryable: true,
    cause: err,
  });
}
