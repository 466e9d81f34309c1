import type { Config } from '../config.ts';
import { CrsError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { statusOf } from './http-error.ts';
import { cancelled } from './rate-limiter.ts';
import type { SecretScrubber } from './secrets.ts';
import type { AuthHeader, AuthScheme, Credentials } from './transport.ts';

/** RFC 8693 §2.1 constants. */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

export interface TokenExchangeOptions {
  /** Posts the form to the token endpoint (through the client's transport) and returns the JSON body. */
  post: (form: URLSearchParams) => Promise<unknown>;
  scrubber: SecretScrubber;
  log: Logger;
  /** Refresh this long before `expires_in` runs out (at most half the token's lifetime). */
  refreshSkewMs: number;
  now: () => number;
}

type ApiConfig = Config['api'];

/**
 * The three schemes of spec §5. The v2 access token is the static CRS_ACCESS_TOKEN when set
 * (it cannot be refreshed), else obtained by token exchange with the service-account JWT as the
 * subject token, cached until shortly before it expires, and shared by concurrent callers.
 */
export function createCredentials(cfg: ApiConfig, ex: TokenExchangeOptions): Credentials {
  const exchange =
    cfg.accessToken === undefined &&
    cfg.tokenUrl &&
    cfg.clientId &&
    cfg.clientSecret &&
    cfg.serviceAccountToken
      ? new TokenExchange(cfg.clientId, cfg.clientSecret, cfg.serviceAccountToken, ex)
      : undefined;

  return {
    async header(scheme: AuthScheme, signal: AbortSignal | undefined): Promise<AuthHeader | undefined> {
      switch (scheme) {
        case 'none':
          return undefined;
        case 'service-account':
          if (!cfg.serviceAccountToken) throw missing('CRS_SERVICE_ACCOUNT_TOKEN', 'the analytics export');
          return { name: 'authorization', value: `Bearer ${cfg.serviceAccountToken}` };
        case 'api-key':
          if (!cfg.apiKey) throw missing('CRS_API_KEY', 'the legacy API');
          return { name: 'x-api-key', value: cfg.apiKey };
        case 'access-token': {
          if (cfg.accessToken) return { name: 'authorization', value: `Bearer ${cfg.accessToken}` };
          if (!exchange) {
            throw missing(
              'CRS_ACCESS_TOKEN (or CRS_TOKEN_URL + CRS_CLIENT_ID + CRS_CLIENT_SECRET + CRS_SERVICE_ACCOUNT_TOKEN)',
              'the v2 thread API',
            );
          }
          return { name: 'authorization', value: `Bearer ${await exchange.get(signal)}` };
        }
      }
    },
    invalidate(scheme: AuthScheme, used: string): boolean {
      if (scheme !== 'access-token' || !exchange) return false;
      exchange.invalidate(used.replace(/^Bearer /, ''));
      return true;
    },
  };
}

function missing(variable: string, purpose: string): CrsError {
  return new CrsError('CONFIG_INVALID', `${variable} is not set; it is needed for ${purpose}`);
}

/**
 * One RFC 8693 exchange of the service-account JWT for an access token, cached until shortly
 * before it expires; concurrent callers share the exchange in flight.
 */
class TokenExchange {
  readonly #clientId: string;
  readonly #clientSecret: string;
  readonly #subjectToken: string;
  readonly #o: TokenExchangeOptions;
  #cached: { token: string; refreshAt: number } | undefined;
  #inflight: Promise<string> | undefined;

  constructor(clientId: string, clientSecret: string, subjectToken: string, o: TokenExchangeOptions) {
    this.#clientId = clientId;
    this.#clientSecret = clientSecret;
    this.#subjectToken = subjectToken;
    this.#o = o;
  }

  get(signal: AbortSignal | undefined): Promise<string> {
    const cached = this.#cached;
    if (cached && this.#o.now() < cached.refreshAt) return Promise.resolve(cached.token);
    if (!this.#inflight) {
      // Not tied to any one caller's signal: other callers may be waiting on the same exchange.
      this.#inflight = this.#exchange().finally(() => {
        this.#inflight = undefined;
      });
    }
    return raceAbort(this.#inflight, signal);
  }

  invalidate(token: string): void {
    if (this.#cached?.token === token) this.#cached = undefined;
  }

  async #exchange(): Promise<string> {
    const o = this.#o;
    const form = new URLSearchParams({
      grant_type: TOKEN_EXCHANGE_GRANT,
      client_id: this.#clientId,
      client_secret: this.#clientSecret,
      subject_token: this.#subjectToken,
      subject_token_type: JWT_TOKEN_TYPE,
    });
    let body: unknown;
    try {
      body = await o.post(form);
    } catch (err) {
      // RFC 6749 §5.2: a rejected grant or client is a 400 (or 401); no retry can fix either.
      const status = statusOf(err);
      if (err instanceof CrsError && (status === 400 || status === 401 || status === 403)) {
        throw new CrsError('HTTP_UNAUTHORIZED', `${err.message} (the token endpoint refused the exchange)`, {
          details: err.details ? { ...err.details } : undefined,
        });
      }
      throw err;
    }
    const b = (body ?? {}) as { access_token?: unknown; token_type?: unknown; expires_in?: unknown };
    if (typeof b.access_token !== 'string' || b.access_token === '') {
      throw new CrsError('HTTP_BAD_RESPONSE', 'tokenExchange failed: the answer has no access_token', {
        details: { operation: 'tokenExchange' },
      });
    }
    if (typeof b.token_type === 'string' && b.token_type.toLowerCase() !== 'bearer') {
      throw new CrsError(
        'HTTP_BAD_RESPONSE',
        `tokenExchange failed: token_type ${o.scrubber.scrub(b.token_type).slice(0, 40)} is not Bearer`,
        { details: { operation: 'tokenExchange' } },
      );
    }
    o.scrubber.add(b.access_token);
    // RFC 6749 says a number; some servers send a numeric string.
    const expiresIn =
      typeof b.expires_in === 'string' && /^\d+$/.test(b.expires_in) ? Number(b.expires_in) : b.expires_in;
    const lifetimeMs = typeof expiresIn === 'number' && expiresIn >= 0 ? expiresIn * 1000 : undefined;
    // Without expires_in the token is kept until the service rejects it (then refreshed once).
    const refreshAt =
      lifetimeMs === undefined
        ? Number.POSITIVE_INFINITY
        : o.now() + lifetimeMs - Math.min(o.refreshSkewMs, lifetimeMs / 2);
    this.#cached = { token: b.access_token, refreshAt };
    o.log.debug({ expiresInS: expiresIn }, 'crs access token obtained by token exchange');
    return b.access_token;
  }
}

function raceAbort<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) {
    p.catch(() => {});
    return Promise.reject(cancelled(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(cancelled(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
