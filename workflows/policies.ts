import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../contract/activities.ts';
import type { LoadTimings } from '../contract/workflows.ts';
import {
  ENRICH_HEARTBEAT_TIMEOUT_MS,
  LOAD_HEARTBEAT_TIMEOUT_MS,
  LOAD_RETRY,
  MAX_RETRY_INTERVAL_MS,
} from '../src/common/activity-timeouts.ts';
import { NON_RETRYABLE_CODES } from '../src/errors.ts';

/**
 * Activity proxies with their timeouts and retry policies, chosen per kind of work. Failure
 * types listed as non-retryable are the CrsError codes no retry can fix (configuration, auth,
 * contract), from the one list in src/errors.ts; the activities mark them non-retryable
 * themselves, the list is the second lock.
 */
const NON_RETRYABLE = [...NON_RETRYABLE_CODES];

/** Ledger bookkeeping: quick statements; retried while the database is briefly unreachable. */
export const ledger = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: {
    initialInterval: '1s',
    backoffCoefficient: 2,
    maximumInterval: '30s',
    maximumAttempts: 20,
    nonRetryableErrorTypes: NON_RETRYABLE,
  },
});

/**
 * The daily upkeep (the retention sweep): one transaction over every row past retention, which
 * the first sweep of a warehouse holding years of text makes long; a few attempts, then the next
 * daily run.
 */
export const upkeep = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  retry: {
    initialInterval: '10s',
    backoffCoefficient: 2,
    maximumInterval: '2 minutes',
    maximumAttempts: 3,
    nonRetryableErrorTypes: NON_RETRYABLE,
  },
});

/**
 * The export load of one day. A big day streams for a long time, so the bound is the heartbeat,
 * not the total: a worker that dies is noticed within the heartbeat timeout and the load resumes
 * from its committed checkpoint on another attempt. Throttling waits for the server's
 * Retry-After (the activity sets the next retry delay); other transient faults back off to 5
 * minutes, for up to 12 attempts (about an hour of outage; LOAD_RETRY). Between attempts the day
 * stays `running` with its last error; it is marked failed only when the attempts run out or an
 * error no retry can fix ends them (activities/load.ts). A run may set its own heartbeat timeout
 * and first retry interval (LoadTimings); the attempts and the longest pause stay these.
 */
export function loadProxy(timings: LoadTimings = {}) {
  return proxyActivities<Activities>({
    startToCloseTimeout: '6 hours',
    heartbeatTimeout: timings.heartbeatTimeout ?? LOAD_HEARTBEAT_TIMEOUT_MS,
    retry: {
      initialInterval: timings.retryInterval ?? LOAD_RETRY.initialIntervalMs,
      backoffCoefficient: LOAD_RETRY.backoffCoefficient,
      maximumInterval: LOAD_RETRY.maximumIntervalMs,
      maximumAttempts: LOAD_RETRY.maximumAttempts,
      nonRetryableErrorTypes: NON_RETRYABLE,
    },
  });
}

/** Waiting for another run's workflow: as long as it takes, heartbeating every 10 s. */
export const waiting = proxyActivities<Activities>({
  startToCloseTimeout: '7 days',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '5s', maximumInterval: '1 minute' },
});

/** One batch of thread enrichment: many API calls, each with its own retries in the client. */
export const enrichment = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: ENRICH_HEARTBEAT_TIMEOUT_MS,
  retry: {
    initialInterval: '5s',
    backoffCoefficient: 2,
    maximumInterval: MAX_RETRY_INTERVAL_MS,
    maximumAttempts: 8,
    nonRetryableErrorTypes: NON_RETRYABLE,
  },
});

/** Quick ledger reads the workflow decides on; local, so they cost one marker in the history. */
export const lookup = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', maximumInterval: '10s', maximumAttempts: 10 },
});
