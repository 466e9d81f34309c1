/**
 * Every error code, with whether a retry can ever help. `retryable: false` codes are the ones no
 * retry can fix (bad configuration, rejected credentials, a service that breaks its contract):
 * an activity reports them as non-retryable and the workflows' retry policies list them too, so
 * a failure that escapes the activity's mapping still stops at once. For the other codes the
 * error itself says (`CrsError.retryable`) whether this one occurrence is worth another try.
 * This module is bundled into workflow code too: it must not import node: modules.
 */
export const ERROR_CODES = {
  CONFIG_INVALID: { retryable: false },
  USAGE: { retryable: false },
  DB_UNAVAILABLE: { retryable: true },
  DB_TIMEOUT: { retryable: true },
  MIGRATION_FAILED: { retryable: false },
  INPUT_UNREADABLE: { retryable: true },
  LOAD_FAILED: { retryable: true },
  LOAD_BUSY: { retryable: true },
  HTTP_UNAUTHORIZED: { retryable: false },
  HTTP_FORBIDDEN: { retryable: false },
  HTTP_NOT_FOUND: { retryable: true },
  HTTP_UNPROCESSABLE: { retryable: false },
  HTTP_THROTTLED: { retryable: true },
  HTTP_SERVER: { retryable: true },
  HTTP_CLIENT: { retryable: false },
  HTTP_NETWORK: { retryable: true },
  HTTP_TIMEOUT: { retryable: true },
  HTTP_BAD_RESPONSE: { retryable: false },
  STREAM_CUT: { retryable: true },
  EXPORT_NOT_JSONL: { retryable: true },
  SOURCE_CHANGED: { retryable: true },
  CANCELLED: { retryable: true },
  TEMPORAL_UNAVAILABLE: { retryable: true },
  INTERNAL: { retryable: true },
} as const satisfies Readonly<Record<string, { readonly retryable: boolean }>>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The codes no retry can fix, for Temporal's `nonRetryableErrorTypes`. */
export const NON_RETRYABLE_CODES: readonly ErrorCode[] = Object.freeze(
  (Object.keys(ERROR_CODES) as ErrorCode[]).filter((code) => !ERROR_CODES[code].retryable),
);

/** True when no retry can fix an error of this code (an unknown code is not one of them). */
export function isNonRetryableCode(code: string): boolean {
  return Object.hasOwn(ERROR_CODES, code) && !ERROR_CODES[code as ErrorCode].retryable;
}

/**
 * One error type for everything the connector reports on purpose. `code` is stable and
 * machine-readable; `retryable` tells Temporal and the HTTP client whether trying again can help.
 * Messages never carry secrets: callers pass operation names and statuses, not headers or URLs
 * with credentials.
 */
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
