import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { toFailure } from '../../activities/failures.ts';
import { CrsError } from '../../src/errors.ts';
import {
  type DbFailureKind,
  dbFailureKind,
  isRetryableDbError,
  toDbCrsError,
} from '../../src/warehouse/db-errors.ts';

/** An error as pg builds it from a server ErrorResponse. */
function pgError(code: string, message = `server error ${code}`): Error {
  const e = new pg.DatabaseError(message, message.length, 'error');
  e.code = code;
  return e;
}

/** An error as Node's net module reports a socket failure. */
function sysError(code: string): Error {
  return Object.assign(new Error(`${code.toLowerCase()} 127.0.0.1:5432`), { code, syscall: 'read' });
}

const TABLE: Array<[string, unknown, DbFailureKind | undefined]> = [
  // Connection-class SQLSTATEs.
  ['08006 connection_failure', pgError('08006'), 'connection'],
  ['08003 connection_does_not_exist', pgError('08003'), 'connection'],
  ['08001 unable to connect', pgError('08001'), 'connection'],
  ['08P01 protocol_violation', pgError('08P01'), 'connection'],
  ['57P01 admin_shutdown (pg_terminate_backend)', pgError('57P01'), 'connection'],
  ['57P02 crash_shutdown', pgError('57P02'), 'connection'],
  ['57P03 cannot_connect_now', pgError('57P03'), 'connection'],
  ['53300 too_many_connections', pgError('53300'), 'connection'],
  ['25P03 idle_in_transaction_session_timeout', pgError('25P03'), 'connection'],
  // Errors without a SQLSTATE.
  ['pg: Connection terminated unexpectedly', new Error('Connection terminated unexpectedly'), 'connection'],
  ['pg: Connection terminated', new Error('Connection terminated'), 'connection'],
  [
    'pg: not queryable',
    new Error('Client has encountered a connection error and is not queryable'),
    'connection',
  ],
  ['pg-pool: connect timeout', new Error('timeout exceeded when trying to connect'), 'connection'],
  ['ECONNRESET', sysError('ECONNRESET'), 'connection'],
  ['ECONNREFUSED', sysError('ECONNREFUSED'), 'connection'],
  ['EPIPE', sysError('EPIPE'), 'connection'],
  ['ETIMEDOUT', sysError('ETIMEDOUT'), 'connection'],
  ['EHOSTUNREACH', sysError('EHOSTUNREACH'), 'connection'],
  ['EAI_AGAIN (DNS during failover)', sysError('EAI_AGAIN'), 'connection'],
  [
    'AggregateError of refused addresses',
    new AggregateError([sysError('ECONNREFUSED'), sysError('ECONNREFUSED')], 'connect failed'),
    'connection',
  ],
  // Timeouts and conflicts.
  ['57014 statement timeout', pgError('57014', 'canceling statement due to statement timeout'), 'timeout'],
  ['55P03 lock_not_available', pgError('55P03', 'canceling statement due to lock timeout'), 'timeout'],
  ['40001 serialization_failure', pgError('40001'), 'conflict'],
  ['40P01 deadlock_detected', pgError('40P01'), 'conflict'],
  // Wrapped: the cause decides.
  [
    'CrsError wrapping a terminated connection',
    new CrsError('LOAD_FAILED', 'load x failed', { cause: new Error('Connection terminated unexpectedly') }),
    'connection',
  ],
  // Not transient: a bug or bad data, retrying cannot help.
  ['23505 unique_violation', pgError('23505'), undefined],
  ['42P01 undefined_table', pgError('42P01'), undefined],
  ['22P02 invalid_text_representation', pgError('22P02'), undefined],
  ['53100 disk_full', pgError('53100'), undefined],
  ['ENOTFOUND (a wrong host name)', sysError('ENOTFOUND'), undefined],
  ['a plain error', new Error('boom'), undefined],
  [
    'a message that merely mentions a termination, with a SQLSTATE',
    pgError('P0001', 'Connection terminated by policy'),
    undefined,
  ],
  ['a string', 'Connection terminated unexpectedly', undefined],
  ['undefined', undefined, undefined],
  ['null', null, undefined],
];

describe('database failure classification', () => {
  it.each(TABLE)('when the error is %s, then its kind is as listed', (_name, err, kind) => {
    expect(dbFailureKind(err)).toBe(kind);
    expect(isRetryableDbError(err)).toBe(kind !== undefined);
  });

  it('when an error cause chain loops, then classification still ends', () => {
    const a = new Error('a') as Error & { cause?: unknown };
    const b = new Error('b', { cause: a });
    a.cause = b;
    expect(dbFailureKind(a)).toBeUndefined();
  });

  it('when a connection failure is mapped, then it is a retryable DB_UNAVAILABLE that keeps the cause', () => {
    const cause = new Error('Connection terminated unexpectedly');
    const e = toDbCrsError(cause, 'LOAD_FAILED', 'load l failed');
    expect(e).toMatchObject({ code: 'DB_UNAVAILABLE', retryable: true });
    expect(e.cause).toBe(cause);
    expect(e.message).toContain('load l failed');
    expect(e.message).toContain('Connection terminated unexpectedly');
  });

  it('when a lock timeout is mapped, then it is a retryable DB_TIMEOUT naming CRS_DB_LOCK_TIMEOUT_MS', () => {
    const e = toDbCrsError(pgError('55P03', 'canceling statement due to lock timeout'), 'LOAD_FAILED', 'x');
    expect(e).toMatchObject({ code: 'DB_TIMEOUT', retryable: true });
    expect(e.message).toContain('CRS_DB_LOCK_TIMEOUT_MS');
    expect(e.message).toContain('[55P03]');
  });

  it('when a conflict is mapped, then it keeps the fallback code and is retryable', () => {
    expect(toDbCrsError(pgError('40P01'), 'LOAD_FAILED', 'x')).toMatchObject({
      code: 'LOAD_FAILED',
      retryable: true,
    });
  });

  it('when a constraint violation is mapped, then it is the fallback code and not retryable', () => {
    expect(toDbCrsError(pgError('23505'), 'LOAD_FAILED', 'x')).toMatchObject({
      code: 'LOAD_FAILED',
      retryable: false,
    });
  });

  it('when a CrsError is mapped, then it passes unchanged', () => {
    const e = new CrsError('LOAD_BUSY', 'busy', { retryable: true });
    expect(toDbCrsError(e, 'LOAD_FAILED', 'x')).toBe(e);
  });

  it('when an activity throws a raw connection error, then Temporal sees a retryable DB_UNAVAILABLE', () => {
    expect(toFailure(sysError('ECONNRESET'))).toMatchObject({ type: 'DB_UNAVAILABLE', nonRetryable: false });
    expect(toFailure(pgError('57014'))).toMatchObject({ type: 'DB_TIMEOUT', nonRetryable: false });
  });

  it('when an activity throws a retryable database CrsError, then Temporal retries it', () => {
    const e = toDbCrsError(new Error('Connection terminated unexpectedly'), 'LOAD_FAILED', 'load l failed');
    expect(toFailure(e)).toMatchObject({ type: 'DB_UNAVAILABLE', nonRetryable: false });
  });
});
