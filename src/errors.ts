/**
 * One error type for everything the connector reports on purpose. `code` is stable and
 * machine-readable; `retryable` tells Temporal and the HTTP client whether trying again can help.
 * Messages never carry secrets: callers pass operation names and statuses, not headers or URLs
 * with credentials.
 */
export type ErrorCode =
  | 'CONFIG_INVALID'
  | 'USAGE'
  | 'DB_UNAVAILABLE'
  | 'DB_TIMEOUT'
  | 'MIGRATION_FAILED'
  | 'INPUT_UNREADABLE'
  | 'LOAD_FAILED'
  | 'LOAD_BUSY'
  | 'HTTP_UNAUTHORIZED'
  | 'HTTP_FORBIDDEN'
  | 'HTTP_NOT_FOUND'
  | 'HTTP_UNPROCESSABLE'
  | 'HTTP_THROTTLED'
  | 'HTTP_SERVER'
  | 'HTTP_CLIENT'
  | 'HTTP_NETWORK'
  | 'HTTP_TIMEOUT'
  | 'HTTP_BAD_RESPONSE'
  | 'STREAM_CUT'
  | 'EXPORT_NOT_JSONL'
  | 'SOURCE_CHANGED'
  | 'CANCELLED'
  | 'TEMPORAL_UNAVAILABLE'
  | 'INTERNAL';

export class CrsError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { retryable?: boolean; cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'CrsError';
    this.code = code;
    this.retryable = opts.retryable ?? false;
    this.details = opts.details;
  }
}

/** Exit statuses of the CLI. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

export function isCrsError(err: unknown): err is CrsError {
  return err instanceof CrsError;
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
