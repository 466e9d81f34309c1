import { type Config, fileSettingOf, readSecretFileAgain, type SecretSetting } from '../config.ts';
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
 * The three schemes of spec §5. The v2 access token is the static CRS_ACCESS_TOKEN when set,
 * else obtained by token exchange with the service-account JWT as the subject token, cached until
 * shortly before it expires, and shared by concurrent callers. A credential read from a file
 * (CRS_ACCESS_TOKEN_FILE, …) is read again when the service refuses it: see `Credential`.
 */
export function createCredentials(cfg: ApiConfig, ex: TokenExchangeOptions): Credentials {
  const credential = (setting: SecretSetting, value: string | undefined) =>
    new Credential(setting, value, cfg.secretFiles?.[setting], ex);
  const serviceAccount = credential('CRS_SERVICE_ACCOUNT_TOKEN', cfg.serviceAccountToken);
  const accessToken = credential('CRS_ACCESS_TOKEN', cfg.accessToken);
  const apiKey = credential('CRS_API_KEY', cfg.apiKey);
  const exchange =
    cfg.accessToken === undefined &&
    cfg.tokenUrl &&
    cfg.clientId &&
    cfg.clientSecret &&
    cfg.serviceAccountToken
      ? new TokenExchange(cfg.clientId, credential('CRS_CLIENT_SECRET', cfg.clientSecret), serviceAccount, ex)
      : undefined;

  return {
    async header(scheme: AuthScheme, signal: AbortSignal | undefined): Promise<AuthHeader | undefined> {
      switch (scheme) {
        case 'none':
          return undefined;
        case 'service-account':
          if (!serviceAccount.value) throw missing('CRS_SERVICE_ACCOUNT_TOKEN', 'the analytics export');
          return { name: 'authorization', value: `Bearer ${serviceAccount.value}` };
        case 'api-key':
          if (!apiKey.value) throw missing('CRS_API_KEY', 'the legacy API');
          return { name: 'x-api-key', value: apiKey.value };
        case 'access-token': {
          if (accessToken.value) return { name: 'authorization', value: `Bearer ${accessToken.value}` };
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
    async renew(scheme: AuthScheme, used: string): Promise<boolean> {
      switch (scheme) {
        case 'none':
          return false;
        case 'service-account':
          return serviceAccount.renew(bearerToken(used));
        case 'api-key':
          return apiKey.renew(used);
        case 'access-token':
          if (!exchange) return accessToken.renew(bearerToken(used));
          exchange.invalidate(bearerToken(used));
          return true;
      }
    },
  };
}

const bearerToken = (header: string) => header.replace(/^Bearer /, '');

/**
 * One credential setting's value. Given as a file (NAME_FILE), it is read from the file again
 * when the service refuses it, so that a secret rotated on disk (a Kubernetes secret updated in
 * place, a file replaced) is taken up by the next request, without a restart. Only then: a
 * file is not watched, and a credential the service accepts is never read again.
 */
class Credential {
  readonly #setting: SecretSetting;
  readonly #file: string | undefined;
  readonly #o: Pick<TokenExchangeOptions, 'scrubber' | 'log'>;
  #value: string | undefined;
  /** The read in progress: callers refused at once share it. */
  #reading: Promise<void> | undefined;

  constructor(
    setting: SecretSetting,
    value: string | undefined,
    file: string | undefined,
    o: Pick<TokenExchangeOptions, 'scrubber' | 'log'>,
  ) {
    this.#setting = setting;
    this.#value = value;
    this.#file = file;
    this.#o = o;
  }

  get value(): string | undefined {
    return this.#value;
  }

  /**
   * After the service refused `used`: true when there is another value to try, one that another
   * caller read meanwhile or the one the file holds now. A file that cannot be read leaves the
   * value as it was (a warning names the setting and the path, never the content).
   */
  async renew(used: string): Promise<boolean> {
    if (this.#value !== used) return this.#value !== undefined;
    if (this.#file === undefined) return false;
    this.#reading ??= this.#read(this.#file).finally(() => {
      this.#reading = undefined;
    });
    await this.#reading;
    return this.#value !== used;
  }

  async #read(file: string): Promise<void> {
    const read = await readSecretFileAgain(this.#setting, file);
    if ('problem' in read) {
      this.#o.log.warn(
        { setting: this.#setting },
        `the service refused ${this.#setting}, and it could not be read again: ${read.problem}`,
      );
      return;
    }
    // Surrounding blanks trimmed: the setting's own rule, as when it was read at start.
    const value = read.value.trim();
    if (value === this.#value) {
      this.#o.log.warn(
        { setting: this.#setting, file },
        `the service refused ${this.#setting}, and ${fileSettingOf(this.#setting)} still holds the same`,
      );
      return;
    }
    this.#o.scrubber.add(value);
    this.#value = value;
    this.#o.log.info(
      { setting: this.#setting, file },
      `the service refused ${this.#setting}; read again from ${fileSettingOf(this.#setting)}, it changed: using the new one`,
    );
  }
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
  readonly #clientSecret: Credential;
  readonly #subjectToken: Credential;
  readonly #o: TokenExchangeOptions;
  #cached: { token: string; refreshAt: number } | undefined;
  #inflight: Promise<string> | undefined;

  constructor(clientId: string, clientSecret: Credential, subjectToken: Credential, o: TokenExchangeOptions) {
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

  /**
   * The exchange; refused, once more when the client secret or the subject token read again from
   * its file (CRS_CLIENT_SECRET_FILE, CRS_SERVICE_ACCOUNT_TOKEN_FILE) changed: rotated on disk.
   */
  async #exchange(): Promise<string> {
    const secret = this.#clientSecret.value ?? '';
    const subject = this.#subjectToken.value ?? '';
    try {
      return await this.#exchangeWith(secret, subject);
    } catch (err) {
      if (!(err instanceof RefusedExchange)) throw err;
      const renewed = await Promise.all([
        this.#clientSecret.renew(secret),
        this.#subjectToken.renew(subject),
      ]);
      if (!renewed.includes(true)) throw err.error;
      try {
        return await this.#exchangeWith(this.#clientSecret.value ?? '', this.#subjectToken.value ?? '');
      } catch (again) {
        throw again instanceof RefusedExchange ? again.error : again;
      }
    }
  }

  async #exchangeWith(clientSecret: string, subjectToken: string): Promise<string> {
    const o = this.#o;
    const form = new URLSearchParams({
      grant_type: TOKEN_EXCHANGE_GRANT,
      client_id: this.#clientId,
      client_secret: clientSecret,
      subject_token: subjectToken,
      subject_token_type: JWT_TOKEN_TYPE,
    });
    let body: unknown;
    try {
      body = await o.post(form);
    } catch (err) {
      // RFC 6749 §5.2: a rejected grant or client is a 400 (or 401); no retry can fix either.
      const status = statusOf(err);
      if (err instanceof CrsError && (status === 400 || status === 401 || status === 403)) {
        throw new RefusedExchange(
          new CrsError('HTTP_UNAUTHORIZED', `${err.message} (the token endpoint refused the exchange)`, {
            details: err.details ? { ...err.details } : undefined,
          }),
        );
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

/** The token endpoint's refusal of the client or the grant (the error to throw, if it stands). */
class RefusedExchange {
  readonly error: CrsError;
  constructor(error: CrsError) {
    this.error = error;
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
