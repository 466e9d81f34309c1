import { type Logger, pino } from 'pino';

export type { Logger };

/**
 * Paths pino blanks out wherever they appear in a logged object. Secrets reach the logger only
 * by accident (an error carrying request options, a config dump), so the net is wide.
 */
const REDACT_PATHS = [
  'authorization',
  'Authorization',
  '*.authorization',
  '*.Authorization',
  'headers.authorization',
  '*.headers.authorization',
  '*.headers["x-api-key"]',
  'headers["x-api-key"]',
  '"x-api-key"',
  '*["x-api-key"]',
  'token',
  '*.token',
  'accessToken',
  '*.accessToken',
  'access_token',
  '*.access_token',
  'serviceAccountToken',
  '*.serviceAccountToken',
  'clientSecret',
  '*.clientSecret',
  'client_secret',
  '*.client_secret',
  'subject_token',
  '*.subject_token',
  'apiKey',
  '*.apiKey',
  'password',
  '*.password',
  'databaseUrl',
  '*.databaseUrl',
  'secret',
  '*.secret',
];

/**
 * A value that reads as an ordinary word ("required", "missing", "Not-Set"): what follows
 * "token:" or "Bearer" in a message about a credential rather than the credential itself.
 * Credentials have digits, dots, mixed case or length; a letters-only one of 20 or more is
 * masked all the same.
 */
const ORDINARY_WORD = /^(?:[A-Za-z][a-z]*|[A-Z]+)(?:-[a-z]+)*$/;
const isOrdinaryWord = (v: string) => v.length < 20 && ORDINARY_WORD.test(v);

// A JSON Web Token wherever it stands: three base64url parts, the first two JSON objects.
const JWT = /\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g;
// user:password@ in a URL of any scheme (postgres://, https://, amqp://).
const URL_CREDENTIALS = /(\b[a-z][a-z0-9+.-]*:\/\/[^:/@\s]+:)[^@\s]+(@)/gi;
const BEARER = /(\bbearer\s+)([A-Za-z0-9\-._~+/]+=*)/gi;
// `name=value` (a query string, an environment dump) always holds a value; `name: value` holds
// one when the value is quoted (JSON) or does not read as a word: "CRS_ACCESS_TOKEN: required for
// the thread API" is a sentence about a setting, not the setting.
const NAMED_VALUE = /((?:token|secret|api[_-]?key|password)(["']?)\s*([:=])\s*(["']?))([^"'\s&,}]+)/gi;

/** Masks credentials inside free text (error messages from libraries, URLs). */
export function redactText(text: string): string {
  return text
    .replace(JWT, '[redacted]')
    .replace(URL_CREDENTIALS, '$1[redacted]$2')
    .replace(BEARER, (m, lead: string, value: string) => (isOrdinaryWord(value) ? m : `${lead}[redacted]`))
    .replace(NAMED_VALUE, (m, lead: string, _q: string, sep: string, quote: string, value: string) =>
      sep === ':' && quote === '' && isOrdinaryWord(value) ? m : `${lead}[redacted]`,
    );
}

/** Replaces each of `values` (6 characters or more; longest first) in `text` with the mask. */
export function maskValues(text: string, values: readonly string[]): string {
  let out = text;
  for (const v of values) {
    out = out.split(v).join('[redacted]');
    const encoded = encodeURIComponent(v);
    if (encoded !== v) out = out.split(encoded).join('[redacted]');
  }
  return out;
}

// Shorter values are too likely to occur in ordinary text to be worth masking (and are not
// realistic credentials).
export const MIN_SECRET_LENGTH = 6;

/** The values worth masking, longest first (a secret that contains another is masked whole). */
export function secretValues(values: ReadonlyArray<string | undefined>): string[] {
  const kept = values.filter((v): v is string => v !== undefined && v.length >= MIN_SECRET_LENGTH);
  return [...new Set(kept)].sort((a, b) => b.length - a.length);
}

export interface LogOptions {
  level?: string;
  /** Pretty, human output; default: when stderr is a terminal. */
  pretty?: boolean;
  /** Where JSON lines go; default stderr so that stdout stays for command output. */
  destination?: NodeJS.WritableStream;
  /**
   * The configured credentials: masked wherever they appear in a message, a top-level string
   * field or an error, whatever their shape (a token with no telltale name before it).
   */
  secrets?: ReadonlyArray<string | undefined>;
}

export function createLogger(opts: LogOptions = {}): Logger {
  const level = opts.level ?? process.env.LOG_LEVEL ?? 'info';
  const secrets = secretValues(opts.secrets ?? []);
  const scrub = (text: string) => redactText(maskValues(text, secrets));
  const base: pino.LoggerOptions = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    serializers: {
      err: (err: unknown) => {
        const s = pino.stdSerializers.err(err as Error);
        if (s && typeof s.message === 'string') s.message = scrub(s.message);
        if (s && typeof s.stack === 'string') s.stack = scrub(s.stack);
        return s;
      },
    },
    ...(secrets.length === 0
      ? {}
      : {
          hooks: {
            logMethod(args, method) {
              const masked = args.map((a: unknown) => {
                if (typeof a === 'string') return maskValues(a, secrets);
                if (a === null || typeof a !== 'object' || a instanceof Error) return a;
                const o: Record<string, unknown> = { ...(a as Record<string, unknown>) };
                for (const [k, v] of Object.entries(o))
                  if (typeof v === 'string') o[k] = maskValues(v, secrets);
                return o;
              });
              method.apply(this, masked as Parameters<typeof method>);
            },
          },
        }),
  };
  const pretty = opts.pretty ?? (opts.destination === undefined && process.stderr.isTTY === true);
  if (pretty) {
    return pino({
      ...base,
      transport: {
        target: 'pino-pretty',
        options: { destination: 2, colorize: true, ignore: 'pid,hostname' },
      },
    });
  }
  return pino(base, (opts.destination ?? pino.destination(2)) as pino.DestinationStream);
}
