/**
 * The activities' heartbeat and retry timeouts (workflows/policies.ts sets them), and the
 * staleness threshold they imply: how long a run or a day load that still reads `running` may
 * show no sign of life before it is taken for abandoned (its workflow terminated, its worker gone
 * for good). The warehouse applies that threshold in SQL (`abandoned_after()`, used by the
 * `run_liveness` and `day_liveness` views), which a migration cannot import from here; a test
 * checks that the two agree. Pure constants: safe in workflow code.
 */

/** Heartbeat timeout of a day load (a run may set its own; see loadProxy). */
export const LOAD_HEARTBEAT_TIMEOUT_MS = 30_000;
/** Heartbeat timeout of an enrichment batch. */
export const ENRICH_HEARTBEAT_TIMEOUT_MS = 120_000;
/** The longest pause between two attempts of a day load or an enrichment batch. */
export const MAX_RETRY_INTERVAL_MS = 300_000;

/**
 * The retry policy of a day load (workflows/policies.ts `loadProxy`): 5 s, doubling, at most 5
 * minutes apart, 12 attempts (about an hour of outage). Its activity reads the policy Temporal
 * gives it to tell its next attempt's time; this is what it assumes when the server gives none.
 */
export const LOAD_RETRY = {
  initialIntervalMs: 5_000,
  backoffCoefficient: 2,
  maximumIntervalMs: MAX_RETRY_INTERVAL_MS,
  maximumAttempts: 12,
} as const;

/**
 * A live run shows a sign of life (a heartbeat, a batch commit) every few seconds while one of
 * its activities runs. The longest silence of a live one: an attempt on a lost worker noticed
 * after the longest heartbeat timeout, then the longest retry interval before the next attempt
 * beats again, 7 minutes. Twice that, 14 minutes, leaves room for a slow worker start.
 */
export const STALE_AFTER_MS = 2 * (ENRICH_HEARTBEAT_TIMEOUT_MS + MAX_RETRY_INTERVAL_MS);
