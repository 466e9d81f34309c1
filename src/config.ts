import { readFileSync, statSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { CrsError } from './errors.ts';

/**
 * The whole configuration of crs-sync, read from the environment (a `.env` file is honoured by
 * the CLI before this runs). Parsed once, frozen. Every setting is optional here because each
 * command needs a different subset; `requireSettings` names what a command cannot run without,
 * and every problem is reported at once.
 */

// At most 54 characters: the bookkeeping's schema is this name and `_internal` (src/warehouse/db.ts).
const identifier = /^[a-z_][a-z0-9_]{0,53}$/;

const optionalString = z
  .string()
  .trim()
  .transform((v) => (v === '' ? undefined : v))
  .optional();

const optionalUrl = optionalString.pipe(z.url({ protocol: /^https?$/ }).optional());

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Milliseconds of a duration such as `26h`, `90m`, `30s`, `1.5d`; undefined when it is not one. */
export function parseDuration(v: string): number | undefined {
  const m = DURATION.exec(v.trim());
  return m ? Math.round(Number(m[1]) * (UNIT_MS[m[2] as string] ?? Number.NaN)) : undefined;
}

/** A duration setting (`26h`), as milliseconds within [min, max]. */
function durationSetting(def: string, minMs: number, maxMs: number) {
  return z
    .string()
    .trim()
    .default(def)
    .transform((v, ctx) => {
      const ms = parseDuration(v === '' ? def : v);
      if (ms === undefined || ms < minMs || ms > maxMs) {
        ctx.addIssue({
          code: 'custom',
          message: `must be a duration such as ${def} (a number and ms, s, m, h or d), from ${minMs / 1000} s to ${maxMs / 3_600_000} h`,
        });
        return z.NEVER;
      }
      return ms;
    });
}

// Comma-separated http(s) URLs. A problem names the entry by position, never by value: a
// webhook URL carries its own credential (Slack's path is the secret).
const urlList = z
  .string()
  .optional()
  .transform((v, ctx) => {
    const entries = (v ?? '')
      .split(',')
      .map((u) => u.trim())
      .filter((u) => u !== '');
    entries.forEach((u, i) => {
      let ok = false;
      try {
        const url = new URL(u);
        ok = (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
      } catch {
        ok = false;
      }
      if (!ok) ctx.addIssue({ code: 'custom', message: `entry ${i + 1} is not an http(s) URL` });
    });
    return entries;
  });

/** What a numeric setting accepts: the range, and whether it takes whole numbers only. */
export interface NumberRule {
  min: number;
  max: number;
  /** Whole numbers only (a count, milliseconds, a port); otherwise a fraction is allowed too. */
  whole: boolean;
  /** `min` itself is not allowed (a share or a rate above 0). */
  aboveMin?: boolean;
}

const WHOLE = /^\d+$/;
const DECIMAL = /^(?:\d+(?:\.\d+)?|\.\d+)$/;

/**
 * A numeric setting's value from its text: undefined when it is blank (unset, so its default
 * applies: the rule of every other setting), else the number, or the reason it is not one.
 * Decimal digits only: `Number()` would read `0x10` as 16, `1e3` as 1000, `+5` as 5 and `5.0`
 * as a whole 5, and a blank as 0 (a timeout, a guard, a port silently turned off); none of those
 * is what someone who wrote it can be assumed to mean, so each is refused by name.
 */
export function readNumber(
  raw: string | undefined,
  rule: NumberRule,
): { value: number | undefined } | { problem: string } {
  const text = raw?.trim() ?? '';
  if (text === '') return { value: undefined };
  const range = `${rule.aboveMin ? `above ${rule.min} and up` : `from ${rule.min}`} to ${rule.max}`;
  const problem = rule.whole
    ? `must be a whole number ${range}, in decimal digits only (no sign, fraction, exponent or 0x)`
    : `must be a number ${range}, in decimal digits with an optional fraction (no sign, exponent or 0x)`;
  if (!(rule.whole ? WHOLE : DECIMAL).test(text)) return { problem };
  const value = Number(text);
  const low = rule.aboveMin ? value <= rule.min : value < rule.min;
  return low || value > rule.max ? { problem } : { value };
}

/** A numeric setting (readNumber's rule) that is optional: undefined when unset or blank. */
export function optionalNumberSetting(rule: NumberRule) {
  return z
    .string()
    .optional()
    .transform((v, ctx) => {
      const r = readNumber(v, rule);
      if ('problem' in r) {
        ctx.addIssue({ code: 'custom', message: r.problem });
        return z.NEVER;
      }
      return r.value;
    });
}

/** A numeric setting with a default (for unset and blank alike). */
export function numberSetting(def: number, rule: NumberRule) {
  return optionalNumberSetting(rule).transform((v) => v ?? def);
}

function intSetting(def: number, min: number, max: number) {
  return numberSetting(def, { min, max, whole: true });
}

/**
 * The most live rows an intraday pull reads the line hashes of (CRS_KNOWN_LINES_MAX). The read
 * returns them as one text of 48 characters a row (src/ingest/merge/known-lines.ts), and one string in
 * V8 holds at most 2^29 - 24 characters (~11.18M rows): past that the client fails outside the
 * query's promise and the worker dies on every pull. 10M rows is 480M characters, ~11 % under it
 * (and under PostgreSQL's 1 GB for one value).
 */
export const KNOWN_LINES_CEILING = 10_000_000;

/**
 * The longest export line and the largest JSON answer accepted: each is decoded into one string
 * (at most 2^29 - 24 characters in V8, just under 512 MiB) and parsed whole, which holds it at
 * least twice more; 256 MiB leaves room for that.
 */
const MAX_TEXT_BYTES = 256 * 1024 * 1024;

const envSchema = z.object({
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
      .optional(),
  ),
  // A long-running command (worker, schedule create) on the embedded PostgreSQL is a deployment
  // whose DATABASE_URL went missing, unless someone says they mean it.
  CRS_ALLOW_EMBEDDED: optionalString
    .pipe(z.enum(['1', 'true', 'yes', '0', 'false', 'no'], 'must be 1/true/yes or 0/false/no').optional())
    .transform((v) => v === '1' || v === 'true' || v === 'yes'),
  CRS_SCHEMA: z
    .string()
    .default('crs')
    .refine(
      (v) => identifier.test(v),
      'must be a plain lower-case SQL identifier ([a-z_][a-z0-9_]*) of at most 54 characters',
    ),
  CRS_BASE_URL: optionalUrl,
  CRS_LEGACY_BASE_URL: optionalUrl,
  CRS_SERVICE_ACCOUNT_TOKEN: optionalString,
  CRS_ACCESS_TOKEN: optionalString,
  CRS_TOKEN_URL: optionalUrl,
  CRS_CLIENT_ID: optionalString,
  CRS_CLIENT_SECRET: optionalString,
  CRS_API_KEY: optionalString,
  TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  TEMPORAL_TASK_QUEUE: z.string().default('crs-sync'),
  TEMPORAL_API_KEY: optionalString,
  TEMPORAL_TLS_CERT_PATH: optionalString,
  TEMPORAL_TLS_KEY_PATH: optionalString,
  TEMPORAL_TLS_CA_PATH: optionalString,
  TEMPORAL_TLS_SERVER_NAME: optionalString,
  CRS_LOOKBACK_DAYS: intSetting(3, 0, 365),
  CRS_RATE_LIMIT_RPS: numberSetting(10, { min: 0, max: 10_000, whole: false, aboveMin: true }),
  // The shared request budget's name in the warehouse (every worker with the same name shares
  // CRS_RATE_LIMIT_RPS); "off" gives each process a budget of its own.
  CRS_SHARED_BUDGET_NAME: z
    .string()
    .trim()
    .default('crs')
    .refine((v) => /^[A-Za-z0-9_.:-]{1,100}$/.test(v), 'must be 1-100 of A-Z a-z 0-9 _ . : - (or "off")'),
  // The shared budget's limit for the whole deployment, whatever each worker's CRS_RATE_LIMIT_RPS.
  CRS_SHARED_BUDGET_RPS: optionalNumberSetting({ min: 0, max: 10_000, whole: false, aboveMin: true }),
  CRS_ENRICH_CONCURRENCY: intSetting(8, 1, 256),
  CRS_HTTP_TIMEOUT_MS: intSetting(60_000, 100, 3_600_000),
  // Largest JSON answer read (a history page, an artifact, the thread list, a token): a hostile or
  // broken server must not fill the worker's memory. The export streams line by line instead.
  CRS_MAX_RESPONSE_BYTES: intSetting(128 * 1024 * 1024, 64 * 1024, MAX_TEXT_BYTES),
  CRS_MAX_LINE_BYTES: intSetting(16 * 1024 * 1024, 1024, MAX_TEXT_BYTES),
  CRS_BATCH_SIZE: intSetting(1000, 1, 50_000),
  // Key partitions of one load, each merged on a connection of its own.
  CRS_LOAD_PARTITIONS: intSetting(4, 1, 64),
  CRS_KNOWN_LINES_MAX: intSetting(2_000_000, 0, KNOWN_LINES_CEILING),
  // The pause before an export stream cut part-way (or answered with an error page) is opened
  // again within the same attempt; it doubles at each reopen, up to 5 s or this figure if larger.
  // Five reopens at the default wait 7.75 s in all before the attempt fails to Temporal's retry.
  CRS_SOURCE_REOPEN_PAUSE: durationSetting('250ms', 1, 60_000),
  // A complete export that would soft-delete more than this percent of a day's live rows has
  // its deletes held for review (a normal day deletes a handful; 100 turns the guard off).
  CRS_DELETE_GUARD: numberSetting(10, { min: 0, max: 100, whole: false }),
  // The same over a load of several complete days (a file imported with --from/--to): the share
  // of all their live rows it may soft-delete. Lower than the per-day guard, because a whole
  // load's share is the average of its days' shares: at the per-day figure it could delete just
  // under 10 % of every day of a year and never be held.
  CRS_DELETE_GUARD_LOAD: numberSetting(2, { min: 0, max: 100, whole: false }),
  // Days the text of a conversation is kept (docs/privacy.md): older text is cleared by the daily
  // sweep and `crs-sync retention apply`; the rows and every figure stay. Unset: kept.
  CRS_TEXT_RETENTION_DAYS: optionalNumberSetting({ min: 1, max: 36_500, whole: true }),
  // What a record that differs from the known contract (a new field, a field of another JSON
  // type) does: `evolve` loads it as before and records the drift; `freeze` quarantines it
  // (`schema_drift`) until the drift is accepted (`crs-sync schema accept`).
  CRS_RECORD_CONTRACT: z.enum(['evolve', 'freeze']).default('evolve'),
  // How user ids are stored (docs/privacy.md): as the service sends them, or as a keyed hash in
  // UUID form under CRS_PSEUDONYM_KEY (required then, at least 32 characters).
  CRS_USER_ID_POLICY: z.enum(['keep', 'pseudonymize']).default('keep'),
  CRS_PSEUDONYM_KEY: optionalString.pipe(
    z
      .string()
      .min(32, 'must be at least 32 characters (a random secret, e.g. openssl rand -hex 32)')
      .optional(),
  ),
  // Database timeouts (0 turns one off). They stop a statement, lock wait or forgotten transaction
  // that hangs, so the activity fails retryably instead of looking busy for hours; the defaults
  // sit far above what a legitimate day needs (a first load's finalize of a 1M-row day: 41 s).
  CRS_DB_STATEMENT_TIMEOUT_MS: intSetting(600_000, 0, 86_400_000),
  CRS_DB_LOCK_TIMEOUT_MS: intSetting(120_000, 0, 86_400_000),
  CRS_DB_IDLE_TX_TIMEOUT_MS: intSetting(300_000, 0, 86_400_000),
  // Migrations may rewrite a big table, and wait for running loads' locks: their own bound.
  CRS_DB_MIGRATION_TIMEOUT_MS: intSetting(3_600_000, 0, 86_400_000),
  CRS_DB_KEEPALIVE_MS: intSetting(30_000, 0, 3_600_000),
  // A load or enrichment batch heartbeats while it moves; this long without moving (a hung
  // query, a dead network) it stops, so Temporal times the attempt out and retries it.
  CRS_STALL_TIMEOUT_MS: intSetting(300_000, 0, 86_400_000),
  // Freshness: data older than this is late. The default follows the daily schedule (00:30 UTC):
  // a day is loaded half an hour after it ends and is the newest until the next run, 24 h later.
  CRS_FRESHNESS_SLA: durationSetting('26h', 60_000, 90 * 86_400_000),
  // The open day (intraday pulls) with no pull finished for this long is stale (`open_day_stale`):
  // three missed pulls of an hourly schedule. One failed pull is not an alert; the next may succeed.
  CRS_OPEN_DAY_STALE_AFTER: durationSetting('3h', 60_000, 7 * 86_400_000),
  CRS_ALERT_WEBHOOK_URL: urlList,
  // A day whose open rejects exceed this share of its lines read is a quarantine spike.
  CRS_ALERT_QUARANTINE_SHARE: numberSetting(0.01, { min: 0, max: 1, whole: false, aboveMin: true }),
  // How often each worker checks the alert conditions and sends what is due.
  CRS_ALERT_CHECK_INTERVAL: durationSetting('1m', 1_000, 86_400_000),
  // A receiver that has not answered within this is cut off; the message is retried later.
  CRS_ALERT_TIMEOUT: durationSetting('10s', 100, 300_000),
  // A Retry-After pause of the shared request budget longer than this is budget starvation.
  CRS_ALERT_BUDGET_WAIT: durationSetting('5m', 1_000, 86_400_000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Env = z.infer<typeof envSchema>;

export interface Config {
  /** The old names of renamed settings (RENAMED_SETTINGS) this configuration was read from. */
  readonly renamedSettingsUsed: readonly RenamedSetting[];
  /** The secret settings read from files (NAME_FILE, SECRET_SETTINGS): the path of each. */
  readonly secretFiles: SecretFiles;
  readonly databaseUrl: string | undefined;
  /** CRS_ALLOW_EMBEDDED: worker and schedule create may run without DATABASE_URL. */
  readonly allowEmbedded: boolean;
  readonly schema: string;
  readonly api: {
    readonly baseUrl: string | undefined;
    readonly legacyBaseUrl: string | undefined;
    readonly serviceAccountToken: string | undefined;
    readonly accessToken: string | undefined;
    readonly tokenUrl: string | undefined;
    readonly clientId: string | undefined;
    readonly clientSecret: string | undefined;
    readonly apiKey: string | undefined;
    /**
     * The files the service's credentials were read from (CRS_ACCESS_TOKEN_FILE, …), by setting:
     * each is read again when the service refuses its credential (src/api/credentials.ts).
     */
    readonly secretFiles?: SecretFiles;
    readonly timeoutMs: number;
    readonly rateLimitRps: number;
    /** CRS_SHARED_BUDGET_NAME: the shared budget's name; undefined ("off"): a budget per process. */
    readonly rateBudget?: string | undefined;
    /** CRS_SHARED_BUDGET_RPS: the shared budget's limit fixed by the deployment (absent: the lowest asked). */
    readonly rateBudgetRps?: number | undefined;
    /** CRS_MAX_RESPONSE_BYTES (absent: the client's default, the same 128 MiB). */
    readonly maxResponseBytes?: number;
  };
  readonly temporal: {
    readonly address: string;
    readonly namespace: string;
    readonly taskQueue: string;
    readonly apiKey: string | undefined;
    readonly tlsCertPath: string | undefined;
    readonly tlsKeyPath: string | undefined;
    readonly tlsCaPath: string | undefined;
    readonly tlsServerName: string | undefined;
  };
  readonly lookbackDays: number;
  readonly enrichConcurrency: number;
  readonly maxLineBytes: number;
  readonly batchSize: number;
  /** CRS_LOAD_PARTITIONS: the key partitions of one load, a database connection each. */
  readonly loadConnections: number;
  /**
   * CRS_KNOWN_LINES_MAX: the most live rows of the open day an intraday pull reads the line hashes
   * of, to skip the lines the warehouse holds (src/ingest/merge/known-lines.ts); 0 turns the skip off.
   */
  readonly knownLinesMax: number;
  /** CRS_SOURCE_REOPEN_PAUSE: the first pause before a cut export stream is opened again, doubling. */
  readonly sourceReopenPauseMs: number;
  /** CRS_DELETE_GUARD: percent of a day's live rows above which its deletes are held. */
  readonly deleteGuardPct: number;
  /** CRS_DELETE_GUARD_LOAD: percent of a multi-day load's live rows above which all its deletes are held. */
  readonly deleteGuardLoadPct: number;
  /** CRS_TEXT_RETENTION_DAYS: days the text of messages, history, citations and artifacts is kept; undefined: kept. */
  readonly textRetentionDays: number | undefined;
  /**
   * CRS_RECORD_CONTRACT: `evolve` loads drifted export records, history entries and artifacts and
   * notes the drift; `freeze` quarantines them (`schema_drift`).
   */
  readonly schemaContract: 'evolve' | 'freeze';
  /** CRS_USER_ID_POLICY, with CRS_PSEUDONYM_KEY: how user ids are stored. */
  readonly userIds: { readonly policy: 'keep' } | { readonly policy: 'pseudonymize'; readonly key: string };
  readonly db: {
    readonly statementTimeoutMs: number;
    readonly lockTimeoutMs: number;
    readonly idleTxTimeoutMs: number;
    readonly migrationTimeoutMs: number;
    readonly keepAliveMs: number;
  };
  readonly stallTimeoutMs: number;
  /** CRS_FRESHNESS_SLA in seconds: data older than this is late. */
  readonly freshnessSlaSeconds: number;
  /** CRS_OPEN_DAY_STALE_AFTER in seconds: the open day with no intraday pull finished for longer is stale. */
  readonly openDayStaleAfterSeconds: number;
  readonly alerts: {
    /** CRS_ALERT_WEBHOOK_URL: every receiver (secrets: never logged whole). */
    readonly webhookUrls: readonly string[];
    /** CRS_ALERT_QUARANTINE_SHARE: open rejects over lines read of a day that make a spike. */
    readonly quarantineShare: number;
    readonly checkIntervalMs: number;
    readonly timeoutMs: number;
    /** CRS_ALERT_BUDGET_WAIT: a shared-budget pause longer than this is starvation. */
    readonly budgetWaitMs: number;
  };
  readonly logLevel: Env['LOG_LEVEL'];
}

/**
 * Settings renamed, old name to new. The old name is still read for one release, with a warning
 * naming the new one (`renamedSettingWarnings`); set both to different values and the
 * configuration is refused, naming both, rather than one silently winning.
 */
export const RENAMED_SETTINGS = {
  CRS_RATE_BUDGET: 'CRS_SHARED_BUDGET_NAME',
  CRS_RATE_BUDGET_RPS: 'CRS_SHARED_BUDGET_RPS',
  CRS_SCHEMA_CONTRACT: 'CRS_RECORD_CONTRACT',
  CRS_LOAD_CONNECTIONS: 'CRS_LOAD_PARTITIONS',
} as const;

export type RenamedSetting = keyof typeof RENAMED_SETTINGS;

/**
 * The environment with each old name's value under its new name. A blank old name is unset, as
 * any blank setting; the same value under both names is no conflict (a deployment part-way
 * through the rename), only a warning. The values compared are never shown: names only.
 */
function readRenamed(env: Record<string, string | undefined>): {
  env: Record<string, string | undefined>;
  used: RenamedSetting[];
  problems: string[];
} {
  const out = { ...env };
  const used: RenamedSetting[] = [];
  const problems: string[] = [];
  for (const [old, now] of Object.entries(RENAMED_SETTINGS) as [RenamedSetting, string][]) {
    const before = env[old]?.trim() ?? '';
    if (before === '') continue;
    const after = env[now]?.trim() ?? '';
    if (after !== '' && after !== before) {
      problems.push(
        `${old}, ${now}: both are set, to different values; ${old} is the old name of ${now}: keep ${now} only`,
      );
      continue;
    }
    out[now] = env[old];
    used.push(old);
  }
  return { env: out, used, problems };
}

/**
 * The settings that hold a secret. Each may be given instead as the path of a file that holds
 * it, under its name and `_FILE` (`CRS_API_KEY_FILE=/run/secrets/crs_api_key`): the way Docker
 * and Kubernetes hand a container its secrets, as read-only files, so that no secret stands in
 * an environment that `docker inspect` or /proc/PID/environ shows. The service's credentials
 * read from a file are read again when the service refuses them (src/api/credentials.ts): a file
 * rotated on disk takes effect without a restart.
 *
 * Every command checks every name here, as it checks every other setting: a name the schema
 * below does not read (the dashboard's token, which its command reads) has a bad file reported
 * all the same. CRS_PSEUDONYM_KEY, the key of pseudonymised ids, is read from a file by the same
 * rule wherever it is read.
 */
export const SECRET_SETTINGS = [
  'DATABASE_URL',
  'CRS_SERVICE_ACCOUNT_TOKEN',
  'CRS_ACCESS_TOKEN',
  'CRS_CLIENT_SECRET',
  'CRS_API_KEY',
  'CRS_ALERT_WEBHOOK_URL',
  'CRS_DASHBOARD_TOKEN',
  'TEMPORAL_API_KEY',
  'CRS_PSEUDONYM_KEY',
] as const;

export type SecretSetting = (typeof SECRET_SETTINGS)[number];

/** The secret settings read from files: the absolute path of each, by setting. */
export type SecretFiles = Readonly<Partial<Record<SecretSetting, string>>>;

/** The setting that names the file of `name`. */
export const fileSettingOf = (name: SecretSetting): string => `${name}_FILE`;

/**
 * The file settings help lists: those of the secrets this release reads (the schema's, and the
 * dashboard's token). A listed name nothing reads yet is left out until something does.
 */
export function secretFileSettings(): string[] {
  const read = new Set<string>([...Object.keys(envSchema.shape), 'CRS_DASHBOARD_TOKEN']);
  return SECRET_SETTINGS.filter((name) => read.has(name)).map(fileSettingOf);
}

/** `items` joined by commas into lines of at most `width` characters. */
export function wrapList(items: readonly string[], width: number): string {
  const lines: string[] = [];
  let line = '';
  for (const item of items) {
    const next = line === '' ? item : `${line}, ${item}`;
    if (next.length + 1 > width && line !== '') {
      lines.push(`${line},`);
      line = item;
    } else line = next;
  }
  return [...lines, line].join('\n');
}

/**
 * The largest secret file read. A token, a key or a list of webhook URLs is a few hundred bytes;
 * a path to anything much larger (a log, a disk image) is a mistake, not a secret to hold.
 */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

/**
 * The secret a file holds: its text less one line end at its very end (\n, or \r\n from a
 * Windows editor). `echo`, editors and `kubectl create secret --from-file` of such a file leave
 * one there, and no token ends with one. Only one is removed: the rest is the secret as written,
 * to which the setting's own rule then applies as to the variable (surrounding blanks trimmed).
 */
export function secretOfFileText(text: string): string {
  if (text.endsWith('\r\n')) return text.slice(0, -2);
  if (text.endsWith('\n')) return text.slice(0, -1);
  return text;
}

/** A secret file's value, or what is wrong with it: by setting and path, never by content. */
export type SecretFileRead = { value: string } | { problem: string };

function fileFailure(name: SecretSetting, file: string, err: unknown): SecretFileRead {
  // The code only: a message from the system could say more than the setting and the path.
  const code = (err as NodeJS.ErrnoException).code;
  const why =
    code === 'ENOENT'
      ? 'no such file'
      : code === 'EACCES' || code === 'EPERM'
        ? 'permission denied'
        : code === 'ENOTDIR'
          ? 'a part of the path is not a directory'
          : (code ?? 'unreadable');
  return { problem: `${fileSettingOf(name)}: cannot read ${file} (${why})` };
}

function secretFromStat(
  name: SecretSetting,
  file: string,
  st: { isFile(): boolean; size: number },
): SecretFileRead | undefined {
  if (!st.isFile()) return { problem: `${fileSettingOf(name)}: ${file} is not a file` };
  if (st.size > MAX_SECRET_FILE_BYTES)
    return {
      problem: `${fileSettingOf(name)}: ${file} is larger than ${MAX_SECRET_FILE_BYTES / 1024} KiB, too large for a secret`,
    };
  return undefined;
}

function secretFromText(name: SecretSetting, file: string, text: string): SecretFileRead {
  const value = secretOfFileText(text);
  // Blank is unset for a variable; a file named on purpose and holding nothing is a mistake.
  if (value.trim() === '') return { problem: `${fileSettingOf(name)}: ${file} is empty` };
  return { value };
}

/** Reads the secret of `name` from `file` (an absolute path), at start. */
export function readSecretFile(name: SecretSetting, file: string): SecretFileRead {
  try {
    return (
      secretFromStat(name, file, statSync(file)) ?? secretFromText(name, file, readFileSync(file, 'utf8'))
    );
  } catch (err) {
    return fileFailure(name, file, err);
  }
}

/** The same, without blocking: a running worker reading a rotated file again. */
export async function readSecretFileAgain(name: SecretSetting, file: string): Promise<SecretFileRead> {
  try {
    return (
      secretFromStat(name, file, await stat(file)) ?? secretFromText(name, file, await readFile(file, 'utf8'))
    );
  } catch (err) {
    return fileFailure(name, file, err);
  }
}

/**
 * The environment with each secret given as NAME_FILE read into NAME (NAME_FILE dropped), where
 * each was read from, and the problems: both names set, a file that cannot be read, an empty one.
 * A blank NAME_FILE is unset, as any blank setting. A relative path is from the working
 * directory. No problem holds a secret: settings and paths only.
 */
export function readSecretFiles(env: Record<string, string | undefined>): {
  env: Record<string, string | undefined>;
  files: SecretFiles;
  problems: string[];
} {
  const out = { ...env };
  const files: Partial<Record<SecretSetting, string>> = {};
  const problems: string[] = [];
  for (const name of SECRET_SETTINGS) {
    const fileSetting = fileSettingOf(name);
    const given = env[fileSetting]?.trim() ?? '';
    delete out[fileSetting];
    if (given === '') continue;
    if ((env[name]?.trim() ?? '') !== '') {
      problems.push(
        `${name}, ${fileSetting}: both are set; ${fileSetting} names a file that holds ${name}: set one of them`,
      );
      continue;
    }
    const file = path.resolve(given);
    const read = readSecretFile(name, file);
    if ('problem' in read) {
      problems.push(read.problem);
      continue;
    }
    out[name] = read.value;
    files[name] = file;
  }
  return { env: out, files, problems };
}

/**
 * The environment with its secret files read (readSecretFiles), for code that reads the
 * environment itself (the demo, the dashboard's token); CONFIG_INVALID listing every problem.
 */
export function withSecretFiles(env: Record<string, string | undefined>): Record<string, string | undefined> {
  const read = readSecretFiles(env);
  if (read.problems.length > 0) {
    throw new CrsError('CONFIG_INVALID', `invalid configuration:\n  - ${read.problems.join('\n  - ')}`, {
      details: { problems: read.problems },
    });
  }
  return read.env;
}

/** One warning for each old name the configuration was read from, naming its new name. */
export function renamedSettingWarnings(cfg: Config): string[] {
  return cfg.renamedSettingsUsed.map(
    (old) =>
      `${old} is renamed ${RENAMED_SETTINGS[old]}: set ${RENAMED_SETTINGS[old]} instead (${old} is read for one more release)`,
  );
}

/**
 * The environment validated, secrets given as files read, old names read under their new ones;
 * every problem at once.
 */
function validEnv(env: Record<string, string | undefined>): {
  e: Env;
  renamed: RenamedSetting[];
  files: SecretFiles;
} {
  const secrets = readSecretFiles(env);
  const renamed = readRenamed(secrets.env);
  const result = envSchema.safeParse(renamed.env);
  // A bad value is reported under the name the user wrote: an old name, or the file's setting.
  const givenAs = (name: string) => {
    const file = secrets.files[name as SecretSetting];
    if (file !== undefined) return `${name} (read from ${fileSettingOf(name as SecretSetting)}, ${file})`;
    const old = renamed.used.find((o) => RENAMED_SETTINGS[o] === name && (env[name]?.trim() ?? '') === '');
    return old ? `${old} (renamed ${name})` : name;
  };
  const problems = [
    ...secrets.problems,
    ...renamed.problems,
    ...(result.success
      ? []
      : result.error.issues.map(
          (i) => `${i.path.length > 0 ? givenAs(i.path.join('.')) : '(environment)'}: ${i.message}`,
        )),
    ...(result.success && result.data.CRS_USER_ID_POLICY === 'pseudonymize' && !result.data.CRS_PSEUDONYM_KEY
      ? ['CRS_PSEUDONYM_KEY: required with CRS_USER_ID_POLICY=pseudonymize (or CRS_PSEUDONYM_KEY_FILE)']
      : []),
  ];
  if (!result.success || problems.length > 0) {
    throw new CrsError('CONFIG_INVALID', `invalid configuration:\n  - ${problems.join('\n  - ')}`, {
      details: { problems },
    });
  }
  return { e: result.data, renamed: renamed.used, files: secrets.files };
}

/** The service's credentials among the secret files: those the client reads again on a 401. */
const API_SECRETS = [
  'CRS_SERVICE_ACCOUNT_TOKEN',
  'CRS_ACCESS_TOKEN',
  'CRS_CLIENT_SECRET',
  'CRS_API_KEY',
] as const;

export function parseConfig(env: Record<string, string | undefined> = process.env): Config {
  const { e, renamed, files } = validEnv(env);
  const apiFiles = Object.fromEntries(
    API_SECRETS.filter((name) => files[name] !== undefined).map((name) => [name, files[name]]),
  ) as SecretFiles;
  const cfg: Config = {
    renamedSettingsUsed: renamed,
    secretFiles: files,
    databaseUrl: e.DATABASE_URL,
    allowEmbedded: e.CRS_ALLOW_EMBEDDED,
    schema: e.CRS_SCHEMA,
    api: {
      baseUrl: e.CRS_BASE_URL?.replace(/\/+$/, ''),
      legacyBaseUrl: e.CRS_LEGACY_BASE_URL?.replace(/\/+$/, ''),
      serviceAccountToken: e.CRS_SERVICE_ACCOUNT_TOKEN,
      accessToken: e.CRS_ACCESS_TOKEN,
      tokenUrl: e.CRS_TOKEN_URL,
      clientId: e.CRS_CLIENT_ID,
      clientSecret: e.CRS_CLIENT_SECRET,
      apiKey: e.CRS_API_KEY,
      secretFiles: apiFiles,
      timeoutMs: e.CRS_HTTP_TIMEOUT_MS,
      rateLimitRps: e.CRS_RATE_LIMIT_RPS,
      rateBudget: e.CRS_SHARED_BUDGET_NAME === 'off' ? undefined : e.CRS_SHARED_BUDGET_NAME,
      rateBudgetRps: e.CRS_SHARED_BUDGET_RPS,
      maxResponseBytes: e.CRS_MAX_RESPONSE_BYTES,
    },
    temporal: {
      address: e.TEMPORAL_ADDRESS,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueue: e.TEMPORAL_TASK_QUEUE,
      apiKey: e.TEMPORAL_API_KEY,
      tlsCertPath: e.TEMPORAL_TLS_CERT_PATH,
      tlsKeyPath: e.TEMPORAL_TLS_KEY_PATH,
      tlsCaPath: e.TEMPORAL_TLS_CA_PATH,
      tlsServerName: e.TEMPORAL_TLS_SERVER_NAME,
    },
    lookbackDays: e.CRS_LOOKBACK_DAYS,
    enrichConcurrency: e.CRS_ENRICH_CONCURRENCY,
    maxLineBytes: e.CRS_MAX_LINE_BYTES,
    batchSize: e.CRS_BATCH_SIZE,
    loadConnections: e.CRS_LOAD_PARTITIONS,
    knownLinesMax: e.CRS_KNOWN_LINES_MAX,
    sourceReopenPauseMs: e.CRS_SOURCE_REOPEN_PAUSE,
    deleteGuardPct: e.CRS_DELETE_GUARD,
    deleteGuardLoadPct: e.CRS_DELETE_GUARD_LOAD,
    textRetentionDays: e.CRS_TEXT_RETENTION_DAYS,
    schemaContract: e.CRS_RECORD_CONTRACT,
    userIds:
      e.CRS_USER_ID_POLICY === 'pseudonymize'
        ? { policy: 'pseudonymize', key: e.CRS_PSEUDONYM_KEY ?? '' }
        : { policy: 'keep' },
    db: {
      statementTimeoutMs: e.CRS_DB_STATEMENT_TIMEOUT_MS,
      lockTimeoutMs: e.CRS_DB_LOCK_TIMEOUT_MS,
      idleTxTimeoutMs: e.CRS_DB_IDLE_TX_TIMEOUT_MS,
      migrationTimeoutMs: e.CRS_DB_MIGRATION_TIMEOUT_MS,
      keepAliveMs: e.CRS_DB_KEEPALIVE_MS,
    },
    stallTimeoutMs: e.CRS_STALL_TIMEOUT_MS,
    freshnessSlaSeconds: Math.round(e.CRS_FRESHNESS_SLA / 1000),
    openDayStaleAfterSeconds: Math.round(e.CRS_OPEN_DAY_STALE_AFTER / 1000),
    alerts: {
      webhookUrls: e.CRS_ALERT_WEBHOOK_URL,
      quarantineShare: e.CRS_ALERT_QUARANTINE_SHARE,
      checkIntervalMs: e.CRS_ALERT_CHECK_INTERVAL,
      timeoutMs: e.CRS_ALERT_TIMEOUT,
      budgetWaitMs: e.CRS_ALERT_BUDGET_WAIT,
    },
    logLevel: e.LOG_LEVEL,
  };
  return deepFreeze(cfg);
}

/** Every credential in the configuration, for the logger to mask wherever it shows up. */
export function configuredSecrets(cfg: Config): (string | undefined)[] {
  let dbPassword: string | undefined;
  try {
    dbPassword = cfg.databaseUrl
      ? decodeURIComponent(new URL(cfg.databaseUrl).password) || undefined
      : undefined;
  } catch {
    dbPassword = undefined;
  }
  return [
    cfg.api.serviceAccountToken,
    cfg.api.accessToken,
    cfg.api.clientSecret,
    cfg.api.apiKey,
    cfg.temporal.apiKey,
    dbPassword,
    cfg.userIds.policy === 'pseudonymize' ? cfg.userIds.key : undefined,
    ...cfg.alerts.webhookUrls,
  ];
}

/** Settings a command cannot run without, by environment variable name. */
export type Requirement = 'export' | 'threads' | 'legacy';

export function requireSettings(cfg: Config, needs: readonly Requirement[]): void {
  const problems: string[] = [];
  if (needs.includes('export') || needs.includes('threads')) {
    if (!cfg.api.baseUrl) problems.push('CRS_BASE_URL: required (address of the service)');
  }
  if (needs.includes('export') && !cfg.api.serviceAccountToken) {
    problems.push('CRS_SERVICE_ACCOUNT_TOKEN: required for the analytics export');
  }
  if (needs.includes('threads') && !cfg.api.accessToken) {
    const exchange = [cfg.api.tokenUrl, cfg.api.clientId, cfg.api.clientSecret];
    if (exchange.every((v) => v === undefined)) {
      problems.push(
        'CRS_ACCESS_TOKEN: required for the thread API, or instead CRS_TOKEN_URL + CRS_CLIENT_ID + CRS_CLIENT_SECRET',
      );
    } else {
      if (!cfg.api.tokenUrl) problems.push('CRS_TOKEN_URL: required for token exchange');
      if (!cfg.api.clientId) problems.push('CRS_CLIENT_ID: required for token exchange');
      if (!cfg.api.clientSecret) problems.push('CRS_CLIENT_SECRET: required for token exchange');
      if (!cfg.api.serviceAccountToken)
        problems.push('CRS_SERVICE_ACCOUNT_TOKEN: required as the subject token of the exchange');
    }
  }
  if (needs.includes('legacy')) {
    if (!cfg.api.legacyBaseUrl) problems.push('CRS_LEGACY_BASE_URL: required for the legacy API');
    if (!cfg.api.apiKey) problems.push('CRS_API_KEY: required for the legacy API');
  }
  if (problems.length > 0) {
    throw new CrsError('CONFIG_INVALID', `invalid configuration:\n  - ${problems.join('\n  - ')}`, {
      details: { problems },
    });
  }
}

function deepFreeze<T extends object>(o: T): T {
  for (const v of Object.values(o)) if (v && typeof v === 'object') deepFreeze(v);
  return Object.freeze(o);
}
