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

const SECRET_IN_TEXT = [
  /(bearer\s+)[A-Za-z0-9\-._~+/]+=*/gi,
  /(postgres(?:ql)?:\/\/[^:/@\s]+:)[^@\s]+(@)/gi,
  /((?:token|secret|api[_-]?key|password)["']?\s*[:=]\s*["']?)[^"'\s&,}]+/gi,
];

/** Masks credentials inside free text (error messages from libraries, URLs). */
export function redactText(text: string): string {
  let out = text;
  // With one group, the replacer's third argument is the match offset, not a group.
  for (const re of SECRET_IN_TEXT)
    out = out.replace(re, (_m, a: string, b: unknown) => `${a}[redacted]${typeof b === 'string' ? b : ''}`);
  return out;
}

export interface LogOptions {
  level?: string;
  /** Pretty, human output; default: when stderr is a terminal. */
  pretty?: boolean;
  /** Where JSON lines go; default stderr so that stdout stays for command output. */
  destination?: NodeJS.WritableStream;
}

export function createLogger(opts: LogOptions = {}): Logger {
  const level = opts.level ?? process.env.LOG_LEVEL ?? 'info';
  const base = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    serializers: {
      err: (err: unknown) => {
        const s = pino.stdSerializers.err(err as Error);
        if (s && typeof s.message === 'string') s.message = redactText(s.message);
        if (s && typeof s.stack === 'string') s.stack = redactText(s.stack);
        return s;
      },
    },
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
