/**
 * Paging of the thread history (GET /v2/threads/{id}/messages, spec §4.6). The spec shows
 * neither the default nor the maximum of limit_num (§4.6, §8: "not shown"); these numbers are
 * the crs-sync simulator's (src/simulator/openapi.ts: HISTORY_DEFAULT_LIMIT = 50,
 * HISTORY_MAX_LIMIT = 100). Against the real service, check them before raising the page size:
 * a service that silently caps limit_num below the requested size would make every page look
 * "short" and end paging early.
 */
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 100;

/** Retries after the first attempt, for network errors, timeouts, 408, 429 and 5xx (our choice). */
export const DEFAULT_MAX_RETRIES = 5;
/** Full-jitter backoff: attempt n waits U[0, min(cap, base·2^n)) (our choice). */
export const DEFAULT_BASE_BACKOFF_MS = 250;
export const DEFAULT_MAX_BACKOFF_MS = 20_000;
/** Longest Retry-After honoured; longer requests are waited this long, then retried (our choice). */
export const DEFAULT_MAX_RETRY_AFTER_MS = 60_000;
/** Refresh an exchanged access token this long before it expires (at most half its lifetime). */
export const DEFAULT_TOKEN_REFRESH_SKEW_MS = 60_000;
/**
 * Widening of the one-second rate window, against jitter between our clock and the server's
 * arrival times (connection set-up, event-loop delay). Costs ~5% of the configured rate.
 */
export const DEFAULT_RATE_WINDOW_MARGIN_MS = 50;
/**
 * Largest JSON answer read whole (CRS_MAX_RESPONSE_BYTES): far above any page of 100 entries, any
 * artifact or thread list seen, and below V8's largest string (~512 MiB), past which the text
 * could not even be decoded (our choice).
 */
export const DEFAULT_MAX_RESPONSE_BYTES = 128 * 1024 * 1024;
