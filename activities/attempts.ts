import { ApplicationFailure, CancelledFailure, type RetryPolicy } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time.js';
import { LOAD_RETRY } from '../src/common/activity-timeouts.ts';

/**
 * What follows a failed attempt of an activity, as Temporal will decide it from the activity's
 * retry policy: another attempt (and when), or none. The day load uses it to keep the ledger
 * true between attempts: a day is `failed` only when its load gets no further attempt.
 */
export type AttemptEnd =
  /** Cancelled: by the workflow (which then releases the day) or cut short (Temporal retries it). */
  | { kind: 'cancelled' }
  /** Temporal runs attempt `attempt + 1` in `retryInMs`. */
  | { kind: 'retry'; retryInMs: number }
  /** No further attempt: the attempts ran out, or the error is one no retry can fix. */
  | { kind: 'final'; reason: 'not_retryable' | 'attempts_exhausted' };

/** The policy the activity runs under (from Temporal), else the day load's own. */
export function loadRetryPolicy(fromServer: RetryPolicy | undefined): RetryPolicy {
  return (
    fromServer ?? {
      initialInterval: LOAD_RETRY.initialIntervalMs,
      backoffCoefficient: LOAD_RETRY.backoffCoefficient,
      maximumInterval: LOAD_RETRY.maximumIntervalMs,
      maximumAttempts: LOAD_RETRY.maximumAttempts,
    }
  );
}

/** The policy's limit of attempts; null when it has none (0 or absent means unlimited). */
export function maxAttemptsOf(policy: RetryPolicy): number | null {
  const n = policy.maximumAttempts;
  return n !== undefined && Number.isFinite(n) && n > 0 ? n : null;
}

/**
 * What Temporal does after attempt `attempt` failed with `failure` (as toFailure made it): the
 * delay is the failure's own (a Retry-After) or the policy's backoff, `initialInterval ×
 * backoffCoefficient^(attempt − 1)` capped at `maximumInterval` (Temporal's defaults: 1 s, 2, 100 ×
 * the initial interval).
 */
export function attemptEnd(failure: Error, attempt: number, policy: RetryPolicy): AttemptEnd {
  if (failure instanceof CancelledFailure) return { kind: 'cancelled' };
  if (failure instanceof ApplicationFailure) {
    const types = policy.nonRetryableErrorTypes ?? [];
    if (failure.nonRetryable || (failure.type != null && types.includes(failure.type)))
      return { kind: 'final', reason: 'not_retryable' };
  }
  const max = maxAttemptsOf(policy);
  if (max !== null && attempt >= max) return { kind: 'final', reason: 'attempts_exhausted' };
  const own = failure instanceof ApplicationFailure ? failure.nextRetryDelay : undefined;
  if (own !== undefined && own !== null) return { kind: 'retry', retryInMs: msToNumber(own) };
  const initial = msToNumber(policy.initialInterval ?? 1000);
  const cap = policy.maximumInterval !== undefined ? msToNumber(policy.maximumInterval) : 100 * initial;
  const backoff = initial * (policy.backoffCoefficient ?? 2) ** Math.max(0, attempt - 1);
  return { kind: 'retry', retryInMs: Math.min(cap, backoff) };
}

/** The code a failure carries into the ledger: its type (a CrsError code for the project's own). */
export function failureCode(failure: Error): string | null {
  if (failure instanceof ApplicationFailure) return failure.type ?? null;
  if (failure instanceof CancelledFailure) return 'CANCELLED';
  return failure.name || null;
}
