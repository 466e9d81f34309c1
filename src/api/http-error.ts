import { CrsError, type ErrorCode } from '../errors.ts';

/**
 * Maps an HTTP status to the connector's error taxonomy. Retryable: 408, 429 and 5xx (except
 * 501 Not Implemented and 505, which no retry can fix). Not retryable: every other 4xx — 401
 * (after the one token refresh), 403, 404 and 422 in particular — and 3xx (redirects are not
 * followed).
 */
export function classifyStatus(status: number): { code: ErrorCode; retryable: boolean; name: string } {
  switch (status) {
    case 401:
      return { code: 'HTTP_UNAUTHORIZED', retryable: false, name: 'Unauthorized' };
    case 403:
      return { code: 'HTTP_FORBIDDEN', retryable: false, name: 'Forbidden' };
    case 404:
      return { code: 'HTTP_NOT_FOUND', retryable: false, name: 'Not Found' };
    case 408:
      return { code: 'HTTP_TIMEOUT', retryable: true, name: 'Request Timeout' };
    case 422:
      return { code: 'HTTP_UNPROCESSABLE', retryable: false, name: 'Unprocessable Entity' };
    case 429:
      return { code: 'HTTP_THROTTLED', retryable: true, name: 'Too Many Requests' };
  }
  if (status >= 300 && status <= 399) {
    return { code: 'HTTP_CLIENT', retryable: false, name: 'Redirect (not followed)' };
  }
  if (status >= 500 && status <= 599) {
    return { code: 'HTTP_SERVER', retryable: status !== 501 && status !== 505, name: 'Server Error' };
  }
  return { code: 'HTTP_CLIENT', retryable: false, name: 'Client Error' };
}

/** The upstream error body after trimming: only these fields survive, each shortened. */
export interface UpstreamError {
  error?: string;
  /** OAuth 2.0 token endpoints (RFC 6749 §5.2) explain `error` here. */
  error_description?: string;
  code?: string;
  message?: string;
  detail?: string;
  title?: string;
  request_id?: string;
}

const MAX_FIELD_CHARS = 200;
const MAX_DETAIL_ITEMS = 3;

function short(v: unknown, scrub: (s: string) => string): string | undefined {
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v !== 'string' || v === '') return undefined;
  const s = scrub(v).replace(/\s+/g, ' ');
  return s.length > MAX_FIELD_CHARS ? `${s.slice(0, MAX_FIELD_CHARS)}…` : s;
}

/**
 * Trims an upstream error body to a known set of fields (error, error_description, code, message,
 * detail, title, request_id). `detail` may be FastAPI's validation list `[{loc, msg, type}]`; it is flattened to
 * "loc: msg" strings. Unknown fields, nested objects and non-JSON bodies are dropped entirely —
 * they may echo request headers or tokens — and every kept string is scrubbed of secrets.
 */
export function trimUpstreamError(bodyText: string, scrub: (s: string) => string): UpstreamError | undefined {
  let body: unknown;
  try {
    body = JSON.parse(bodyText);
  } catch {
    return undefined;
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return undefined;
  const b = body as Record<string, unknown>;
  // Some services nest the error object: {"error": {"code": ..., "message": ...}}.
  const inner =
    b.error !== null && typeof b.error === 'object' && !Array.isArray(b.error)
      ? (b.error as Record<string, unknown>)
      : undefined;
  const out: UpstreamError = {};
  const set = (k: keyof UpstreamError, v: unknown) => {
    const s = short(v, scrub);
    if (s !== undefined) out[k] = s;
  };
  set('error', inner ? undefined : b.error);
  set('code', b.code ?? inner?.code);
  set('message', b.message ?? inner?.message);
  set('error_description', b.error_description);
  set('title', b.title);
  set('request_id', b.request_id ?? b.requestId);
  if (Array.isArray(b.detail)) {
    const items = b.detail.slice(0, MAX_DETAIL_ITEMS).map((d) => {
      if (d === null || typeof d !== 'object') return String(d);
      const { loc, msg } = d as { loc?: unknown; msg?: unknown };
      const where = Array.isArray(loc) ? loc.join('.') : '';
      return where ? `${where}: ${String(msg)}` : String(msg);
    });
    const more = b.detail.length > MAX_DETAIL_ITEMS ? ` (+${b.detail.length - MAX_DETAIL_ITEMS} more)` : '';
    set('detail', items.join('; ') + more);
  } else {
    set('detail', b.detail);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

function summary(u: UpstreamError | undefined): string {
  if (!u) return '';
  const text = u.message ?? u.detail ?? u.error_description ?? u.error ?? u.title;
  const parts = [u.code ?? (u.error_description !== undefined ? u.error : undefined), text].filter(
    (p): p is string => p !== undefined,
  );
  return parts.length > 0 ? `: ${parts.join(' — ')}` : '';
}

/** The error for a non-2xx answer, named by operation and status. */
export function httpStatusError(
  operation: string,
  status: number,
  bodyText: string,
  scrub: (s: string) => string,
  extra: { attempts: number; note?: string; retryAfterMs?: number | undefined },
): CrsError {
  const c = classifyStatus(status);
  const upstream = trimUpstreamError(bodyText, scrub);
  const note = extra.note ? ` (${extra.note})` : '';
  // The server's Retry-After travels with the error: the day load's next attempt waits that long
  // (activities/failures.ts makes it the retry delay Temporal uses).
  const wait = c.retryable && extra.retryAfterMs !== undefined ? { retryAfterMs: extra.retryAfterMs } : {};
  return new CrsError(c.code, `${operation} failed: HTTP ${status} ${c.name}${note}${summary(upstream)}`, {
    retryable: c.retryable,
    details: { operation, status, attempts: extra.attempts, ...(upstream ? { upstream } : {}), ...wait },
  });
}

/** The HTTP status an error from this client carries, if it came from an HTTP answer. */
export function statusOf(err: unknown): number | undefined {
  if (!(err instanceof CrsError)) return undefined;
  const s = err.details?.status;
  return typeof s === 'number' ? s : undefined;
}
