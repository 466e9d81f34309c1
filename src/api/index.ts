/**
 * Client of the Conversational Research Service (its contract as we read it: docs/service-contract.md).
 *
 *   const api = createServiceClient({ ...config.api, concurrency: config.enrichConcurrency }, log);
 *
 *   api.exportMessages({ startDate, endDate, signal }): Promise<ExportBody>
 *       GET /v2/analytics/messages, service-account JWT. Resolves once a 2xx answer's headers are
 *       in (retries happen only up to here). ExportBody is an AsyncIterable<Uint8Array> of the
 *       raw JSONL bytes (or .toNodeStream()), with status, fileName (Content-Disposition),
 *       contentType, contentLength, bytesRead, complete, attempts, cancel(). A connection cut or
 *       a stall of timeoutMs mid-body throws CrsError 'STREAM_CUT' (retryable) from the
 *       iterator: restart the request and skip what was committed. Iterate it or cancel() it:
 *       it holds a concurrency slot until then.
 *   api.listThreads({ signal }): Promise<ThreadEntry[]>          GET /v2/threads
 *   api.listMessages(threadId, { startIndex, limitNum, signal }): Promise<HistoryEntry[]>
 *       GET /v2/threads/{id}/messages?start_index&limit_num (limitNum 1..MAX_PAGE_SIZE)
 *   api.historyFrom(threadId, startIndex = 0, pageSize = DEFAULT_PAGE_SIZE, { signal })
 *       async generator of HistoryPage {startIndex, messages, nextIndex, last}; stops after the
 *       first short page (fewer than pageSize entries, possibly empty).
 *   api.getArtifact(threadId, artifactId, { signal }): Promise<ArtifactResult>
 *       GET /v2/threads/{id}/artifacts/{aid} → {artifact}; when v2 answers 404 or 405 and an API
 *       key and legacy address are configured, GET {legacy}/client/v2/thread/{id}/artifact/{aid}
 *       with x-api-key → {artifact_id, artifact}. Result says fetched_via 'v2' | 'legacy'.
 *   api.rate: { limit, windowMs, budget? }; api.stats(): { requests, retries, tokenRefreshes, budget? }
 *
 * A worker builds it with createDeploymentClient (deployment-client.ts): CRS_RATE_LIMIT_RPS is
 * then the tenant's limit, shared by every worker through the warehouse (shared-budget.ts), and
 * a Retry-After pauses them all. Without a `budget` the rate budget is this process's alone.
 *
 * Auth (spec §5): export → Bearer CRS_SERVICE_ACCOUNT_TOKEN; v2 → Bearer CRS_ACCESS_TOKEN, or a
 * token from RFC 8693 exchange at CRS_TOKEN_URL (subject_token = the service-account JWT), cached
 * until shortly before expires_in, one exchange shared by concurrent callers, refreshed once on a
 * 401; legacy → x-api-key CRS_API_KEY.
 *
 * Every HTTP attempt (retries and token exchanges included) first takes a concurrency slot and
 * then a grant of the shared rate budget: never more than floor(rateLimitRps) starts in any
 * 1-second window (rates below 1 → one start per 1/rps s). Retries: network errors, timeouts,
 * 408, 429 and 5xx, up to maxRetries (default 5) with full-jitter exponential backoff (250 ms
 * base, 20 s cap) or the server's Retry-After (seconds or HTTP date, capped at 60 s).
 *
 * Errors are CrsError (src/errors.ts) with code HTTP_UNAUTHORIZED | HTTP_FORBIDDEN |
 * HTTP_NOT_FOUND | HTTP_UNPROCESSABLE | HTTP_THROTTLED | HTTP_SERVER | HTTP_CLIENT |
 * HTTP_NETWORK | HTTP_TIMEOUT | HTTP_BAD_RESPONSE | STREAM_CUT | CANCELLED | CONFIG_INVALID |
 * USAGE, `retryable`, a message naming the operation and status, and details {operation, status,
 * attempts, upstream} where upstream is the error body trimmed to known fields. No credential
 * appears in any message, detail or log line: values the server echoes back are masked.
 * Every method takes an AbortSignal; aborting rejects with CrsError 'CANCELLED'.
 */
export {
  type ArtifactResult,
  type CallOptions,
  createServiceClient,
  type ExportOptions,
  type HistoryEntry,
  type HistoryPage,
  type ServiceClient,
  type ServiceClientOptions,
  type ThreadEntry,
} from './client.ts';
export type { ExportBody } from './export-stream.ts';
export { notAnExport } from './export-stream.ts';
export { classifyStatus, statusOf, type UpstreamError } from './http-error.ts';
export {
  DEFAULT_MAX_RETRIES,
  DEFAULT_PAGE_SIZE,
  MAX_PAGE_SIZE,
} from './limits.ts';
export type { HttpRequest, HttpRequestOptions, TransportStats } from './transport.ts';
