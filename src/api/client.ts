import { Agent, request } from 'undici';
import { present } from '../common/checked.ts';
import { isDay } from '../common/civil-date.ts';
import type { Config } from '../config.ts';
import { CrsError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { createConcurrencyLimiter } from './concurrency.ts';
import { createCredentials } from './credentials.ts';
import { type ExportBody, exportBody } from './export-stream.ts';
import { statusOf } from './http-error.ts';
import {
  DEFAULT_BASE_BACKOFF_MS,
  DEFAULT_MAX_BACKOFF_MS,
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_MAX_RETRIES,
  DEFAULT_MAX_RETRY_AFTER_MS,
  DEFAULT_PAGE_SIZE,
  DEFAULT_RATE_WINDOW_MARGIN_MS,
  DEFAULT_TOKEN_REFRESH_SKEW_MS,
  MAX_PAGE_SIZE,
} from './limits.ts';
import { createRateLimiter, rateWindow } from './rate-limiter.ts';
import { createSecretScrubber, type SecretScrubber } from './secrets.ts';
import {
  type BudgetStore,
  chainLimiters,
  createSharedRateLimiter,
  type SharedRateLimiter,
} from './shared-budget.ts';
import {
  type Credentials,
  createTransport,
  type HttpRequest,
  type JsonResult,
  type SendSpec,
  type Transport,
  type TransportStats,
} from './transport.ts';

export type ServiceClientOptions = Config['api'] & {
  /** Most requests in flight at once (a streamed export holds one until its body ends). */
  concurrency: number;
  maxRetries?: number;
  baseBackoffMs?: number;
  maxBackoffMs?: number;
  maxRetryAfterMs?: number;
  tokenRefreshSkewMs?: number;
  rateWindowMarginMs?: number;
  /** Headers added to every request (e.g. the simulator's fault header in tests). Never credentials. */
  extraHeaders?: Record<string, string>;
  /** For deterministic tests of the jitter. */
  random?: () => number;
  /** The HTTP layer (default: undici's `request`); a wrapper may observe each attempt's start. */
  request?: HttpRequest;
  /**
   * The deployment's shared request budget (src/warehouse/rate-budget.ts): `rateLimitRps` is then
   * the tenant's limit across every worker using it, and a Retry-After pauses them all. Without
   * one (the simulator, `crs-sync sim`, tests of the client) the budget is this process's alone.
   */
  budget?: BudgetStore;
  /** Most grants of the shared budget one lease asks for (default a quarter of the limit). */
  budgetMaxBlock?: number;
};

export interface CallOptions {
  signal?: AbortSignal | undefined;
}

export interface ExportOptions extends CallOptions {
  /** YYYY-MM-DD, inclusive from 00:00:00 UTC; omitted = from the first message. */
  startDate?: string | undefined;
  /** YYYY-MM-DD, inclusive to 23:59:59 UTC; omitted = to the last message. */
  endDate?: string | undefined;
}

/** A thread list entry, as the service sends it (spec §2 shows only thread_id and thread_name). */
export type ThreadEntry = Record<string, unknown> & { thread_id: string };
/**
 * A history entry exactly as received: normally an object with message_id and citations (spec
 * §2), but nothing is checked here, so that the caller can quarantine what breaks the contract.
 */
export type HistoryEntry = unknown;

export interface HistoryPage {
  /** start_index this page was requested with. */
  startIndex: number;
  messages: HistoryEntry[];
  /** start_index of the next page (startIndex + messages.length). */
  nextIndex: number;
  /** True when this page was short, so the history ends here. */
  last: boolean;
}

export interface ArtifactResult {
  artifact_id: string;
  /** The artifact object as received (spec §2: output_type, title, citations, val, resolved_text_objects). */
  artifact: Record<string, unknown>;
  fetched_via: 'v2' | 'legacy';
}

export interface ServiceClient {
  exportMessages(opts: ExportOptions): Promise<ExportBody>;
  listThreads(opts?: CallOptions): Promise<ThreadEntry[]>;
  listMessages(
    threadId: string,
    opts?: CallOptions & { startIndex?: number; limitNum?: number },
  ): Promise<HistoryEntry[]>;
  historyFrom(
    threadId: string,
    startIndex?: number,
    pageSize?: number,
    opts?: CallOptions,
  ): AsyncGenerator<HistoryPage, void, undefined>;
  getArtifact(threadId: string, artifactId: string, opts?: CallOptions): Promise<ArtifactResult>;
  /**
   * The effective rate window (limit starts per windowMs) and counters, for benchmarks and logs;
   * `budget` names the shared budget (absent: this process's own).
   */
  readonly rate: { limit: number; windowMs: number; budget?: string };
  /** `budget`: leases asked of the shared budget, and grants dropped because a lease came back too late. */
  stats(): TransportStats & { budget?: { leases: number; wasted: number } };
}

function checkDay(name: string, v: string | undefined): void {
  if (v !== undefined && !isDay(v))
    throw new CrsError(
      'USAGE',
      `exportMessages: ${name} must be a date YYYY-MM-DD, got ${JSON.stringify(v)}`,
    );
}

function checkIndex(name: string, v: number, min: number, max: number): void {
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new CrsError('USAGE', `${name} must be an integer from ${min} to ${max}, got ${v}`);
  }
}

function badResponse(operation: string, what: string, status?: number): CrsError {
  return new CrsError('HTTP_BAD_RESPONSE', `${operation} failed: ${what}`, {
    details: { operation, ...(status === undefined ? {} : { status }) },
  });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * The client (see index.ts for its interface): its methods share its limiters, credentials and
 * connections, held by a CrsServiceClient (docs/decisions/0019-classes-with-private-fields.md).
 */
export function createServiceClient(options: ServiceClientOptions, log: Logger): ServiceClient {
  return new CrsServiceClient(options, log);
}

/** The client's rate budget: this process's window, and the shared budget in front of it if any. */
function rateLimiters(o: ServiceClientOptions, log: Logger) {
  const window = rateWindow(o.rateLimitRps, o.rateWindowMarginMs ?? DEFAULT_RATE_WINDOW_MARGIN_MS);
  const local = createRateLimiter(window);
  const shared = o.budget
    ? chainLimiters(
        local,
        createSharedRateLimiter({
          store: o.budget,
          // The hold of each lease is the shared budget's margin (shared-budget.ts).
          window: rateWindow(o.rateBudgetRps ?? o.rateLimitRps, 0),
          log,
          ...(o.budgetMaxBlock === undefined ? {} : { maxBlock: o.budgetMaxBlock }),
        }),
      )
    : undefined;
  return { window, rate: shared ?? local, shared };
}

class CrsServiceClient implements ServiceClient {
  readonly rate: ServiceClient['rate'];
  // Private fields (#), not TypeScript's `private`: the options hold the credentials, and no log
  // line or JSON of the client may show them.
  readonly #o: ServiceClientOptions;
  readonly #log: Logger;
  readonly #scrubber: SecretScrubber;
  readonly #shared: SharedRateLimiter | undefined;
  readonly #transport: Transport;
  readonly #credentials: Credentials;

  constructor(o: ServiceClientOptions, log: Logger) {
    this.#o = o;
    this.#log = log.child({ component: 'crs-api' });
    this.#scrubber = createSecretScrubber([o.serviceAccountToken, o.accessToken, o.clientSecret, o.apiKey]);
    const { window, rate, shared } = rateLimiters(o, this.#log);
    this.#shared = shared;
    this.rate = {
      limit: window.limit,
      windowMs: window.windowMs,
      ...(o.budget ? { budget: o.budget.name } : {}),
    };
    this.#transport = createTransport({
      timeoutMs: o.timeoutMs,
      maxResponseBytes: o.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      maxRetries: o.maxRetries ?? DEFAULT_MAX_RETRIES,
      baseBackoffMs: o.baseBackoffMs ?? DEFAULT_BASE_BACKOFF_MS,
      maxBackoffMs: o.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS,
      maxRetryAfterMs: o.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS,
      rate,
      concurrency: createConcurrencyLimiter(o.concurrency),
      credentials: () => this.#credentials,
      scrubber: this.#scrubber,
      log: this.#log,
      random: o.random ?? Math.random,
      request: o.request ?? request,
      // undici's request() rather than fetch(): half the CPU per request (bench/README.md), which
      // is what bounds enrichment at low latency. No more connections per host than requests in
      // flight: a slot is given back as soon as a body is read, a moment before undici counts its
      // connection free, and the next request would otherwise open another one. The transport's
      // own timers are the only timeouts (per attempt, and between chunks of a stream).
      dispatcher: new Agent({ connections: o.concurrency, headersTimeout: 0, bodyTimeout: 0 }),
    });
    this.#credentials = createCredentials(o, {
      post: (form) => this.#tokenExchange(form),
      scrubber: this.#scrubber,
      log: this.#log,
      refreshSkewMs: o.tokenRefreshSkewMs ?? DEFAULT_TOKEN_REFRESH_SKEW_MS,
      now: Date.now,
    });
  }

  stats(): ReturnType<ServiceClient['stats']> {
    const shared = this.#shared;
    return {
      ...this.#transport.stats,
      ...(shared ? { budget: { leases: shared.leases, wasted: shared.wasted } } : {}),
    };
  }

  async exportMessages(opts: ExportOptions): Promise<ExportBody> {
    const operation = 'exportMessages';
    checkDay('startDate', opts.startDate);
    checkDay('endDate', opts.endDate);
    if (opts.startDate && opts.endDate && opts.startDate > opts.endDate) {
      throw new CrsError(
        'USAGE',
        `exportMessages: startDate ${opts.startDate} is after endDate ${opts.endDate}`,
      );
    }
    const q = new URLSearchParams();
    if (opts.startDate) q.set('start_date', opts.startDate);
    if (opts.endDate) q.set('end_date', opts.endDate);
    const qs = q.size > 0 ? `?${q}` : '';
    const open = await this.#transport.stream({
      operation,
      method: 'GET',
      url: `${this.#base(operation)}/v2/analytics/messages${qs}`,
      auth: 'service-account',
      headers: {
        ...this.#o.extraHeaders,
        accept: 'application/x-ndjson, application/jsonl, application/json, */*',
      },
      signal: opts.signal,
    });
    return exportBody(open, {
      operation,
      idleTimeoutMs: this.#o.timeoutMs,
      scrubber: this.#scrubber,
      signal: opts.signal,
    });
  }

  async listThreads(opts: CallOptions = {}): Promise<ThreadEntry[]> {
    const operation = 'listThreads';
    const { body, status } = await this.#getJson({
      operation,
      url: `${this.#base(operation)}/v2/threads`,
      auth: 'access-token',
      signal: opts.signal,
    });
    if (!isObject(body) || !Array.isArray(body.threads)) {
      throw badResponse(operation, 'the answer has no threads array', status);
    }
    return body.threads.filter(
      (t): t is ThreadEntry => isObject(t) && typeof t.thread_id === 'string' && t.thread_id !== '',
    );
  }

  async listMessages(
    threadId: string,
    opts: CallOptions & { startIndex?: number; limitNum?: number } = {},
  ): Promise<HistoryEntry[]> {
    const operation = 'listMessages';
    const startIndex = opts.startIndex ?? 0;
    const limitNum = opts.limitNum ?? DEFAULT_PAGE_SIZE;
    checkIndex('startIndex', startIndex, 0, Number.MAX_SAFE_INTEGER);
    checkIndex('limitNum', limitNum, 1, MAX_PAGE_SIZE);
    const q = new URLSearchParams({ start_index: String(startIndex), limit_num: String(limitNum) });
    const { body, status } = await this.#getJson({
      operation,
      url: `${this.#base(operation)}/v2/threads/${seg(threadId)}/messages?${q}`,
      auth: 'access-token',
      signal: opts.signal,
    });
    if (!isObject(body) || !Array.isArray(body.messages)) {
      throw badResponse(operation, 'the answer has no messages array', status);
    }
    // Entries that are not objects are kept as they are: the enricher quarantines them.
    return body.messages;
  }

  async *historyFrom(
    threadId: string,
    startIndex = 0,
    pageSize = DEFAULT_PAGE_SIZE,
    opts: CallOptions = {},
  ): AsyncGenerator<HistoryPage, void, undefined> {
    checkIndex('pageSize', pageSize, 1, MAX_PAGE_SIZE);
    let index = startIndex;
    let previousFirst: unknown;
    for (;;) {
      const messages = await this.listMessages(threadId, {
        startIndex: index,
        limitNum: pageSize,
        signal: opts.signal,
      });
      // A service that ignored start_index would hand back the same full page forever.
      const head = messages[0];
      const first = isObject(head) ? head.message_id : undefined;
      if (first !== undefined && first === previousFirst) {
        throw badResponse(
          'listMessages',
          `start_index ${index} returned the same entries as the page before`,
        );
      }
      previousFirst = first;
      const last = messages.length < pageSize;
      const page: HistoryPage = { startIndex: index, messages, nextIndex: index + messages.length, last };
      index = page.nextIndex;
      yield page;
      if (last) return;
    }
  }

  async getArtifact(threadId: string, artifactId: string, opts: CallOptions = {}): Promise<ArtifactResult> {
    const operation = 'getArtifact';
    try {
      const { body, status } = await this.#getJson({
        operation,
        url: `${this.#base(operation)}/v2/threads/${seg(threadId)}/artifacts/${seg(artifactId)}`,
        auth: 'access-token',
        signal: opts.signal,
      });
      if (!isObject(body) || !isObject(body.artifact)) {
        throw badResponse(operation, 'the answer has no artifact object', status);
      }
      return { artifact_id: artifactId, artifact: body.artifact, fetched_via: 'v2' };
    } catch (err) {
      const status = statusOf(err);
      const canFallBack = (status === 404 || status === 405) && this.#o.apiKey && this.#o.legacyBaseUrl;
      if (!canFallBack) throw err;
      this.#log.debug({ operation, status }, 'v2 artifact not available; trying the legacy path');
      return this.#legacyArtifact(threadId, artifactId, opts.signal);
    }
  }

  async #legacyArtifact(
    threadId: string,
    artifactId: string,
    signal: AbortSignal | undefined,
  ): Promise<ArtifactResult> {
    const operation = 'getArtifact.legacy';
    const legacy = present(this.#o.legacyBaseUrl, 'the legacy base URL').replace(/\/+$/, '');
    const { body, status } = await this.#getJson({
      operation,
      url: `${legacy}/client/v2/thread/${seg(threadId)}/artifact/${seg(artifactId)}`,
      auth: 'api-key',
      signal,
    });
    if (!isObject(body) || !isObject(body.artifact))
      throw badResponse(operation, 'the answer has no artifact object', status);
    const id =
      typeof body.artifact_id === 'string' && body.artifact_id !== '' ? body.artifact_id : artifactId;
    return { artifact_id: id, artifact: body.artifact, fetched_via: 'legacy' };
  }

  async #tokenExchange(form: URLSearchParams): Promise<unknown> {
    const { body } = await this.#transport.json({
      operation: 'tokenExchange',
      method: 'POST',
      url: present(this.#o.tokenUrl, 'the token URL'),
      auth: 'none',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: form.toString(),
    });
    return body;
  }

  #base(operation: string): string {
    if (!this.#o.baseUrl)
      throw new CrsError('CONFIG_INVALID', `CRS_BASE_URL is not set; it is needed for ${operation}`);
    return this.#o.baseUrl.replace(/\/+$/, '');
  }

  #getJson(spec: Omit<SendSpec, 'method' | 'headers'>): Promise<JsonResult> {
    return this.#transport.json({
      ...spec,
      method: 'GET',
      headers: { ...this.#o.extraHeaders, accept: 'application/json' },
    });
  }
}

const seg = encodeURIComponent;
