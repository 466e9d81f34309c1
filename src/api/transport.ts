import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { itemAt } from '../common/checked.ts';
import { CrsError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { retryDelay } from './backoff.ts';
import type { ConcurrencyLimiter } from './concurrency.ts';
import { classifyStatus, httpStatusError } from './http-error.ts';
import { cancelled, type RateLimiter } from './rate-limiter.ts';
import { parseRetryAfter } from './retry-after.ts';
import type { SecretScrubber } from './secrets.ts';

/** Which credential a request carries (spec §5). */
export type AuthScheme = 'service-account' | 'access-token' | 'api-key' | 'none';

export interface AuthHeader {
  name: string;
  value: string;
}

export interface Credentials {
  /** The header for `scheme` (none for 'none'); may run a token exchange. */
  header(scheme: AuthScheme, signal: AbortSignal | undefined): Promise<AuthHeader | undefined>;
  /**
   * After a 401: forget `used`; true when a fresh credential can be obtained (one refresh): a new
   * exchanged token, or a credential read again from its file that changed there.
   */
  renew(scheme: AuthScheme, used: string): Promise<boolean>;
}

export interface SendSpec {
  /** Operation name used in errors and logs, e.g. 'listMessages'. */
  operation: string;
  method: 'GET' | 'POST';
  url: string;
  auth: AuthScheme;
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal | undefined;
}

export interface JsonResult {
  status: number;
  body: unknown;
  attempts: number;
}

/** What the transport asks of its HTTP layer: undici's `request()` (or a wrapper of it). */
export interface HttpRequestOptions {
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string | undefined;
  signal: AbortSignal;
  dispatcher: Dispatcher;
}
export type HttpRequest = (url: string, options: HttpRequestOptions) => Promise<Dispatcher.ResponseData>;

/** A 2xx response whose body the caller now owns, with the concurrency slot still held. */
export interface OpenStream {
  status: number;
  /** A response header (the first value when repeated), by lower-case name. */
  header(name: string): string | undefined;
  /** The body as it arrives; destroy it to stop the download. */
  body: Readable;
  attempts: number;
  /** Aborts the underlying request (used for idle timeouts and early cancel). */
  abort(reason: unknown): void;
  /** Gives back the concurrency slot; idempotent. */
  release(): void;
  /** True when the abort came from the caller's signal. */
  callerAborted(): boolean;
}

export interface TransportOptions {
  timeoutMs: number;
  /** Largest 2xx JSON body read; past it the read stops, the connection is dropped (not retried). */
  maxResponseBytes: number;
  maxRetries: number;
  baseBackoffMs: number;
  maxBackoffMs: number;
  maxRetryAfterMs: number;
  rate: RateLimiter;
  concurrency: ConcurrencyLimiter;
  credentials: () => Credentials;
  scrubber: SecretScrubber;
  log: Logger;
  random: () => number;
  request: HttpRequest;
  /** Keeps the connections (keep-alive) that every request of the client shares. */
  dispatcher: Dispatcher;
}

export interface TransportStats {
  /** HTTP attempts started (each took one rate grant). */
  requests: number;
  retries: number;
  tokenRefreshes: number;
}

export interface Transport {
  json(spec: SendSpec): Promise<JsonResult>;
  /** Retries until a 2xx answer's headers arrive; the body is then the caller's (no more retries). */
  stream(spec: SendSpec): Promise<OpenStream>;
  readonly stats: TransportStats;
}

// Error bodies are read only this far: enough for any error object, not a whole page by accident.
const MAX_ERROR_BODY_BYTES = 64 * 1024;

class TimeoutSignal extends Error {
  constructor() {
    super('request timed out');
    this.name = 'TimeoutSignal';
  }
}

/**
 * Every HTTP attempt of a client: credentials, a concurrency slot, a rate grant, the request,
 * and what its outcome means (retry, refresh, fail). Its state is the client's options and
 * counters (docs/decisions/0019-classes-with-private-fields.md).
 */
export function createTransport(o: TransportOptions): Transport {
  return new HttpTransport(o);
}

/** A non-2xx or JSON answer, read whole; its connection is back in the pool. */
interface Answer {
  ok: boolean;
  status: number;
  headers: Dispatcher.ResponseData['headers'];
  text: string;
}

/** What one attempt came to: a stream opened, an answer read, or no answer (a failure). */
type Sent = { open: OpenStream } | { answer: Answer } | { failed: CrsError };

/** The state of one call across its attempts. */
interface Call {
  retry: number;
  attempts: number;
  refreshed: boolean;
}

class HttpTransport implements Transport {
  readonly stats: TransportStats = { requests: 0, retries: 0, tokenRefreshes: 0 };
  readonly #o: TransportOptions;

  constructor(o: TransportOptions) {
    this.#o = o;
  }

  json(spec: SendSpec): Promise<JsonResult> {
    return this.#run(spec, 'json');
  }

  stream(spec: SendSpec): Promise<OpenStream> {
    return this.#run(spec, 'stream');
  }

  #run(spec: SendSpec, mode: 'json'): Promise<JsonResult>;
  #run(spec: SendSpec, mode: 'stream'): Promise<OpenStream>;
  /** One call, attempt after attempt, each outcome's branch where it is decided. */
  async #run(spec: SendSpec, mode: 'json' | 'stream'): Promise<JsonResult | OpenStream> {
    const o = this.#o;
    const call: Call = { retry: 0, attempts: 0, refreshed: false };
    for (;;) {
      if (spec.signal?.aborted) throw cancelled(spec.signal);
      // Credentials first: a token exchange needs a concurrency slot of its own.
      const auth = await o.credentials().header(spec.auth, spec.signal);
      const sent = await this.#send(spec, mode, auth, call);
      if ('open' in sent) return sent.open;
      if ('failed' in sent) {
        if (!sent.failed.retryable || call.retry >= o.maxRetries) throw sent.failed;
        await this.#wait(spec, call.retry++, sent.failed, undefined);
        continue;
      }
      const answer = sent.answer;
      o.log.debug(
        { operation: spec.operation, status: answer.status, attempt: call.attempts },
        'crs request done',
      );
      if (answer.ok) return parsedJson(spec.operation, answer, call.attempts);
      if (
        answer.status === 401 &&
        !call.refreshed &&
        auth &&
        (await o.credentials().renew(spec.auth, auth.value))
      ) {
        // One refresh per call; a second 401 is a real authorization failure.
        call.refreshed = true;
        this.stats.tokenRefreshes++;
        o.log.info(
          { operation: spec.operation, auth: spec.auth },
          'crs credential rejected; renewing it once',
        );
        continue;
      }
      await this.#refused(spec, answer, call);
    }
  }

  /**
   * One attempt: a concurrency slot, a rate grant, the request under its timeout, and its answer
   * read (every body is read or destroyed: that is what gives the connection back to the pool).
   * A 2xx answer to a stream keeps its slot and its body for the caller.
   */
  async #send(
    spec: SendSpec,
    mode: 'json' | 'stream',
    auth: AuthHeader | undefined,
    call: Call,
  ): Promise<Sent> {
    const o = this.#o;
    const release = await o.concurrency.acquire(spec.signal);
    const ctrl = new AbortController();
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    const signal = spec.signal ? AbortSignal.any([spec.signal, ctrl.signal]) : ctrl.signal;
    try {
      await o.rate.acquire(spec.signal);
      call.attempts++;
      this.stats.requests++;
      timer = setTimeout(() => {
        timedOut = true;
        ctrl.abort(new TimeoutSignal());
      }, o.timeoutMs);
      const headers: Record<string, string> = { ...spec.headers };
      if (auth) headers[auth.name] = auth.value;
      // undici's request() follows no redirect (that would carry x-api-key, unlike
      // Authorization, to whatever host a redirect names), and no endpoint of the spec redirects.
      const response = await o.request(spec.url, {
        method: spec.method,
        headers,
        body: spec.body,
        signal,
        dispatcher: o.dispatcher,
      });
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      if (ok && mode === 'stream') {
        clearTimeout(timer);
        return { open: openStream(response, call.attempts, ctrl, release, spec.signal) };
      }
      const text = ok
        ? await readLimited(response, o.maxResponseBytes, spec.operation, call.attempts)
        : await readCapped(response.body, MAX_ERROR_BODY_BYTES);
      clearTimeout(timer);
      release();
      return { answer: { ok, status: response.statusCode, headers: response.headers, text } };
    } catch (err) {
      clearTimeout(timer);
      release();
      return { failed: this.#failure(spec, err, timedOut, call.attempts, call.retry >= o.maxRetries) };
    }
  }

  /** A non-2xx answer that no refresh answers: thrown, or waited for and retried (returns). */
  async #refused(spec: SendSpec, answer: Answer, call: Call): Promise<void> {
    const o = this.#o;
    const { status } = answer;
    const exhausted = call.retry >= o.maxRetries && classifyStatus(status).retryable;
    const retryAfterMs = parseRetryAfter(headerValue(answer.headers, 'retry-after') ?? null);
    const e = httpStatusError(spec.operation, status, answer.text, (s) => o.scrubber.scrub(s), {
      attempts: call.attempts,
      note:
        status === 401 && call.refreshed
          ? spec.auth === 'access-token'
            ? 'after refreshing the access token'
            : 'after reading it again from its file'
          : exhausted
            ? `after ${call.attempts} requests`
            : undefined,
      retryAfterMs,
    });
    // The service's limit is the tenant's: its Retry-After holds for every worker, and is
    // recorded before this call gives up or waits on its own.
    if (e.retryable && retryAfterMs !== undefined && retryAfterMs > 0 && o.rate.pause)
      await o.rate.pause(Math.min(retryAfterMs, o.maxRetryAfterMs));
    if (!e.retryable || call.retry >= o.maxRetries) throw e;
    await this.#wait(spec, call.retry++, e, retryAfterMs);
  }

  #failure(spec: SendSpec, err: unknown, timedOut: boolean, attempts: number, last: boolean): CrsError {
    if (spec.signal?.aborted) return cancelled(spec.signal);
    if (err instanceof CrsError) return err;
    const note = last && attempts > 1 ? ` after ${attempts} requests` : '';
    if (timedOut) {
      return new CrsError(
        'HTTP_TIMEOUT',
        `${spec.operation} failed: no answer within ${this.#o.timeoutMs} ms${note}`,
        {
          retryable: true,
          details: { operation: spec.operation, attempts },
        },
      );
    }
    const reason = this.#o.scrubber.scrub(networkReason(err));
    return new CrsError('HTTP_NETWORK', `${spec.operation} failed: network error (${reason})${note}`, {
      retryable: true,
      details: { operation: spec.operation, attempts, reason },
    });
  }

  async #wait(spec: SendSpec, retry: number, err: CrsError, retryAfterMs: number | undefined): Promise<void> {
    const o = this.#o;
    const delayMs = retryDelay(retry, retryAfterMs, {
      baseMs: o.baseBackoffMs,
      capMs: o.maxBackoffMs,
      maxRetryAfterMs: o.maxRetryAfterMs,
      random: o.random,
    });
    this.stats.retries++;
    o.log.warn(
      {
        operation: spec.operation,
        code: err.code,
        status: err.details?.status,
        retry: retry + 1,
        maxRetries: o.maxRetries,
        delayMs,
        retryAfterMs,
      },
      'crs request failed; retrying',
    );
    await sleep(delayMs, spec.signal);
  }
}

/** A 2xx answer's body handed to the caller, with the slot it holds and the abort of its request. */
function openStream(
  res: Dispatcher.ResponseData,
  attempts: number,
  ctrl: AbortController,
  release: () => void,
  callerSignal: AbortSignal | undefined,
): OpenStream {
  return {
    status: res.statusCode,
    header: (name) => headerValue(res.headers, name),
    body: res.body,
    attempts,
    abort: (reason) => ctrl.abort(reason),
    release,
    callerAborted: () => callerSignal?.aborted === true,
  };
}

/** A 2xx JSON answer's value (none for an empty body); text that is not JSON is HTTP_BAD_RESPONSE. */
function parsedJson(operation: string, answer: Answer, attempts: number): JsonResult {
  const { status, text } = answer;
  try {
    return { status, body: text === '' ? undefined : JSON.parse(text), attempts };
  } catch {
    throw new CrsError('HTTP_BAD_RESPONSE', `${operation} failed: the answer is not valid JSON`, {
      details: { operation, status, attempts },
    });
  }
}

/** A short, secret-free description of a request failure (the reason may sit in `cause`). */
export function networkReason(err: unknown): string {
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return typeof code === 'string' ? `${code}: ${cause.message}` : cause.message;
  }
  return String(cause);
}

/** A header of an answer: undici gives repeated ones as an array; the first counts. */
export function headerValue(
  headers: Record<string, string | string[] | undefined>,
  name: string,
): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * A JSON answer's text, refused once it passes `maxBytes` (declared or received): the body is
 * destroyed, which drops its connection, so a server sending without end costs at most that much
 * memory. Not retryable: the same request gets the same answer, and every attempt would download
 * the limit again.
 */
function readLimited(
  response: Dispatcher.ResponseData,
  maxBytes: number,
  operation: string,
  attempts: number,
): Promise<string> {
  const body = response.body;
  const tooLarge = (received: string) => {
    body.destroy();
    return new CrsError(
      'HTTP_BAD_RESPONSE',
      `${operation} failed: the answer is larger than ${maxBytes} bytes (CRS_MAX_RESPONSE_BYTES); ${received}`,
      {
        details: { operation, status: response.statusCode, attempts, maxResponseBytes: maxBytes },
      },
    );
  };
  const declared = Number(headerValue(response.headers, 'content-length'));
  if (declared > maxBytes) return Promise.reject(tooLarge(`it declares ${declared}, nothing was read`));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on('data', (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > maxBytes) reject(tooLarge(`stopped reading after ${size}`));
      else chunks.push(chunk);
    });
    body.on('end', () =>
      resolve(
        chunks.length === 1
          ? itemAt(chunks, 0).toString('utf8')
          : Buffer.concat(chunks, size).toString('utf8'),
      ),
    );
    body.on('error', reject);
  });
}

async function readCapped(body: Readable, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      size += chunk.byteLength;
      if (size >= maxBytes) break;
    }
  } finally {
    // Leaving the loop early has destroyed the body already; this covers an error thrown above.
    body.destroy();
  }
  return Buffer.concat(chunks).subarray(0, maxBytes).toString('utf8');
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(cancelled(signal));
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(t);
      reject(cancelled(signal));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
