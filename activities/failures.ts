import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { CrsError, errorMessage, isNonRetryableCode } from '../src/errors.ts';
import { redactText } from '../src/log.ts';
import { isRetryableDbError, toDbCrsError } from '../src/warehouse/db-errors.ts';

function retryAfterMs(err: CrsError): number | undefined {
  const d = err.details ?? {};
  for (const k of ['retryAfterMs', 'retryAfter']) {
    const v = d[k];
    if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return k === 'retryAfter' ? v * 1000 : v;
  }
  return undefined;
}

/**
 * Turns anything an activity throws into the failure Temporal should see: the CrsError code as
 * the failure type, its retryable flag, the server's Retry-After as the next retry delay, and a
 * message with credentials masked (failures are stored in the workflow history).
 */
export function toFailure(err: unknown): Error {
  if (err instanceof ApplicationFailure || err instanceof CancelledFailure) return err;
  if (err instanceof CrsError) {
    const message = redactText(err.message);
    if (err.code === 'CANCELLED') return new CancelledFailure(message);
    if (!err.retryable || isNonRetryableCode(err.code)) {
      return ApplicationFailure.create({ message, type: err.code, nonRetryable: true });
    }
    const delay = retryAfterMs(err);
    return ApplicationFailure.create({
      message,
      type: err.code,
      ...(delay !== undefined ? { nextRetryDelay: Math.max(delay, 1) } : {}),
    });
  }
  // A raw database error (a query outside the loader's own mapping): a lost connection or a
  // timeout retries under its CrsError code, so the history says what happened.
  if (isRetryableDbError(err)) return toFailure(toDbCrsError(err, 'INTERNAL', 'warehouse query failed'));
  const name = err instanceof Error ? err.name : 'Error';
  return ApplicationFailure.create({ message: redactText(errorMessage(err)), type: name });
}

/** Runs an activity's work with anything it throws turned into a Temporal failure (toFailure). */
export async function guarded<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    throw toFailure(err);
  }
}
