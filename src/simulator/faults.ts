import { itemAt } from '../common/checked.ts';
import { dayToString } from './plan.ts';
import { hash4, stringHash, unit, uuidFromHash } from './prng.ts';

/**
 * Faults on demand. A spec is a compact comma-separated string, e.g.
 *   latency=25ms,429=0.1:2s,5xx=0.05:3,cut=0.02,malformed=0.01,duplicate=0.01,expire=0.05,ttl=30s,delete-before-history=0.05
 * It is set for the whole simulator (CLI flag, setFaults) and may be given per request in the
 * x-sim-faults header, whose keys override the global ones for that request. Every decision is a
 * hash of the seed and what the request is (method + URL, and how many times it was asked), never of
 * wall-clock or arrival order, so a test that repeats the same calls meets the same faults.
 */
export interface FaultSpec {
  /** Delay before every response. */
  latencyMs?: number;
  /** Probability of 429 per request, and the Retry-After it carries. */
  throttle?: { p: number; retryAfterSec: number };
  /** Probability that a URL starts with a burst of `burst` consecutive 5xx answers. */
  serverError?: { p: number; burst: number };
  /** Probability per export response of a cut in the middle of a line (per SSE stream: after 1-3 events). */
  cut?: number;
  /** Probability per export line of an extra malformed line before it. */
  malformed?: number;
  /** Probability per export line of being sent twice. */
  duplicate?: number;
  /** Probability per authenticated request of answering 401 "token expired" to a valid token. */
  expire?: number;
  /** The same, but only to a token presented before: a fresh token's first call always passes. */
  tokenExpiry?: number;
  /** Lifetime of access tokens issued by token exchange (default 3600 s). */
  ttlSec?: number;
  /** Probability per exported thread of being deleted right after the export response. */
  deleteBeforeHistory?: number;
  /**
   * Probability per export response of ending early but cleanly: at a line boundary (with or
   * without the last newline), or a 200 whose body is an HTML page, a JSON error or nothing.
   */
  truncate?: number;
  /** Probability per export response of its body stopping for `ms`, then the connection dropping. */
  stall?: { p: number; ms: number };
  /**
   * Probability per line of a day's export of a poison line before it: valid-looking but not
   * loadable (impossible date, nesting 10,000 deep, 1e200000, whitespace only). Decided by
   * (seed, day, line), not by the request, so the ground truth can list them.
   */
  poison?: number;
  /** Probability per user history entry, and per artifact, of carrying a value no warehouse can store. */
  poisonHistory?: number;
  /**
   * Probability per export record of its line written in another spelling that JSON.parse reads
   * as the same record (`respellLine`): a decoy id before the real one under an escaped key, keys
   * or the id written with `\u` escapes, tabs around colons. Decided by (seed, message id): the
   * same bytes on every read. The ground truth is unchanged; a loader that reads ids from bytes
   * and disagrees with JSON.parse shows.
   */
  respell?: number;
  /**
   * Responses that carry a field the contract does not name (`NEW_FIELD`): schema drift, as a
   * service that started sending one would show it. Every history entry, artifact or thread-list
   * entry of the listed kinds.
   */
  newField?: ReadonlySet<NewFieldTarget>;
  /**
   * Responses of the listed kinds whose objects (each entity, its citations, and the answer around
   * them) carry keys that JavaScript objects inherit (`PROTO_KEYS`): ordinary fields to a service.
   */
  protoKeys?: ReadonlySet<NewFieldTarget>;
}

/** Where the `new-field` fault adds its field. */
export type NewFieldTarget = 'history' | 'artifact' | 'thread';
const NEW_FIELD_TARGETS: readonly NewFieldTarget[] = ['history', 'artifact', 'thread'];
/** The field the `new-field` fault adds, and its value. */
export const NEW_FIELD = 'sim_new_field';
export const NEW_FIELD_VALUE = 'added by the simulator';

/** The keys the `proto-keys` fault adds, with a value of a different JSON type each. */
export const PROTO_KEYS: ReadonlyArray<readonly [string, unknown]> = [
  ['__proto__', { sim_polluted: true }],
  ['constructor', NEW_FIELD_VALUE],
  ['toString', ['added', 'by the simulator']],
  ['hasOwnProperty', 1],
  ['valueOf', null],
];

/**
 * `o` with the PROTO_KEYS as own properties (Object.fromEntries defines them; `{ __proto__: x }`
 * or an assignment would set the prototype instead), which JSON.stringify then writes.
 */
export function withProtoKeys<T extends object>(o: T): T {
  return Object.fromEntries([...Object.entries(o), ...PROTO_KEYS]) as T;
}

/** How a truncated export ends (the `truncate` fault). */
export type TruncateVariant = 'lines' | 'no-final-newline' | 'html' | 'json-error' | 'empty';
export const TRUNCATE_VARIANTS: readonly TruncateVariant[] = [
  'lines',
  'no-final-newline',
  'html',
  'json-error',
  'empty',
];

/** Kinds of poison export lines and history values. */
export type PoisonKind = 'impossible-date' | 'deep-nesting' | 'huge-number' | 'blank';
const POISON_LINE_KINDS: readonly PoisonKind[] = ['impossible-date', 'deep-nesting', 'huge-number', 'blank'];

/** Names under which injected faults are counted (FaultEngine.counts). */
export type FaultKind =
  | '429'
  | '5xx'
  | 'expire'
  | 'token-expiry'
  | 'cut'
  | 'truncate'
  | 'stall'
  | 'malformed'
  | 'duplicate'
  | 'poison-line'
  | 'poison-entry'
  | 'poison-artifact'
  | 'respell';

export const FAULT_SPEC_HELP = [
  'Fault spec: comma-separated key=value, e.g. "latency=25ms,429=0.1:2s,5xx=0.05:3,cut=0.02".',
  '  latency=DUR          delay every response (DUR: 25ms, 2s, 1m; bare number = ms)',
  '  429=P[:DUR]          answer 429 with Retry-After (default 1s) with probability P per request',
  '  5xx=P[:N]            with probability P per URL, its first N (default 3) requests answer 500/502/503',
  '  cut=P                cut the connection mid-line (at a byte) in an export response, or after 1-3 events of an SSE\n' +
    '                       stream (before completion), with probability P per request',
  '  malformed=P          insert a malformed export line before a line, with probability P per line',
  '  duplicate=P          send an export line twice, with probability P per line',
  '  expire=P             answer 401 "token expired" to a valid token, with probability P per request',
  "  token-expiry=P       the same, to exchanged access tokens only, and never on a token's first use",
  '  ttl=DUR              lifetime of exchanged access tokens (default 3600s); expire=DUR means the same',
  '  delete-before-history=P  delete a thread right after an export served it, probability P per thread',
  '  truncate=P           end an export response early but cleanly (at a line boundary, without the last newline,\n' +
    '                       or a 200 carrying an HTML page, a JSON error or an empty body), probability P per request',
  '  stall=P[:DUR]        stop an export body for DUR (default 120s), then drop the connection, probability P per request',
  '  poison=P             put a poison line (impossible date, nesting 10,000 deep, 1e200000, whitespace only) before\n' +
    '                       a line of a day, probability P per line; the same lines on every read of the day',
  '  poison-history=P     give a user history entry, or an artifact, a value no warehouse can store (nesting 10,000\n' +
    '                       deep, 1e200000), probability P per entry / artifact',
  '  respell=P            write an export line in another spelling JSON.parse reads as the same record (a decoy\n' +
    '                       id before the real one under an escaped key, escaped keys or id, tabs), probability P\n' +
    '                       per record; the same bytes on every read',
  '  new-field=KINDS      add the field "sim_new_field" to every history entry, artifact or thread-list entry\n' +
    '                       of the kinds named (history, artifact, thread; joined by +, e.g. history+artifact)',
  '  proto-keys=KINDS     give every entry of the kinds named (as new-field), its citations and the answer around\n' +
    '                       them the keys __proto__, constructor, toString, hasOwnProperty and valueOf',
  '  none                 no faults',
  'The header x-sim-faults takes the same syntax and overrides the global spec for one request.',
].join('\n');

function probability(key: string, v: string): number {
  const p = Number(v);
  if (!Number.isFinite(p) || p < 0 || p > 1 || v.trim() === '') {
    throw new Error(`fault ${key}: probability must be a number in [0, 1], got "${v}"`);
  }
  return p;
}

/** Parses 25ms, 2s, 1m, 1h; a bare number is in `bareUnitMs`. */
export function parseDuration(v: string, bareUnitMs: number, key = 'duration'): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
  if (!m) throw new Error(`fault ${key}: bad duration "${v}" (use e.g. 25ms, 2s, 1m)`);
  const n = Number(m[1]);
  const unitMs =
    m[2] === 'ms' ? 1 : m[2] === 's' ? 1000 : m[2] === 'm' ? 60_000 : m[2] === 'h' ? 3_600_000 : bareUnitMs;
  return n * unitMs;
}

export function parseFaultSpec(text: string | undefined): FaultSpec {
  const spec: FaultSpec = {};
  if (!text) return spec;
  for (const raw of text.split(',')) {
    const part = raw.trim();
    if (part === '' || part === 'none') continue;
    const eq = part.indexOf('=');
    if (eq < 0) throw new Error(`fault "${part}": expected key=value`);
    const key = part.slice(0, eq).trim().toLowerCase();
    const value = part.slice(eq + 1).trim();
    const [a = '', b] = value.split(':');
    switch (key) {
      case 'latency':
        spec.latencyMs = parseDuration(value, 1, key);
        break;
      case '429':
        spec.throttle = {
          p: probability(key, a),
          retryAfterSec: b === undefined ? 1 : Math.max(0, Math.ceil(parseDuration(b, 1000, key) / 1000)),
        };
        break;
      case '5xx': {
        const burst = b === undefined ? 3 : Number(b);
        if (!Number.isInteger(burst) || burst < 1)
          throw new Error(`fault 5xx: burst must be a positive integer, got "${b}"`);
        spec.serverError = { p: probability(key, a), burst };
        break;
      }
      case 'cut':
        spec.cut = probability(key, value);
        break;
      case 'malformed':
        spec.malformed = probability(key, value);
        break;
      case 'duplicate':
        spec.duplicate = probability(key, value);
        break;
      case 'expire':
        // expire=30s (a duration) is read as ttl=30s: the form of the example in the issue.
        if (/^\d+(\.\d+)?(ms|s|m|h)$/.test(value))
          spec.ttlSec = Math.max(1, Math.round(parseDuration(value, 1000, key) / 1000));
        else spec.expire = probability(key, value);
        break;
      case 'token-expiry':
        spec.tokenExpiry = probability(key, value);
        break;
      case 'ttl':
        spec.ttlSec = Math.max(1, Math.round(parseDuration(value, 1000, key) / 1000));
        break;
      case 'delete-before-history':
        spec.deleteBeforeHistory = probability(key, value);
        break;
      case 'truncate':
        spec.truncate = probability(key, value);
        break;
      case 'stall':
        spec.stall = { p: probability(key, a), ms: b === undefined ? 120_000 : parseDuration(b, 1000, key) };
        break;
      case 'poison':
        spec.poison = probability(key, value);
        break;
      case 'poison-history':
        spec.poisonHistory = probability(key, value);
        break;
      case 'respell':
        spec.respell = probability(key, value);
        break;
      case 'new-field':
        spec.newField = newFieldTargets(key, value);
        break;
      case 'proto-keys':
        spec.protoKeys = newFieldTargets(key, value);
        break;
      default:
        throw new Error(`unknown fault "${key}"`);
    }
  }
  return spec;
}

function newFieldTargets(key: string, value: string): ReadonlySet<NewFieldTarget> {
  const out = new Set<NewFieldTarget>();
  for (const t of value.split('+')) {
    const name = t.trim() as NewFieldTarget;
    if (!NEW_FIELD_TARGETS.includes(name)) {
      throw new Error(`fault ${key}: expected ${NEW_FIELD_TARGETS.join(', ')} joined by +, got "${value}"`);
    }
    out.add(name);
  }
  return out;
}

export function mergeFaults(base: FaultSpec, over: FaultSpec): FaultSpec {
  return { ...base, ...over };
}

const MAX_TRACKED_URLS = 200_000;
const TAG_5XX = 0xf501;
const TAG_429 = 0xf429;
const TAG_EXPIRE = 0xf401;
const TAG_CUT = 0xfc07;
const TAG_CUT_AT = 0xfc08;
const TAG_MALFORMED = 0xfba0;
const TAG_DUP = 0xfd0b;
const TAG_DELETE = 0xfde1;
const TAG_TRUNCATE = 0xf7c0;
const TAG_RESPELL = 0xf5e1;
const TAG_TRUNCATE_AT = 0xf7c1;
const TAG_STALL = 0xf57a;
const TAG_POISON = 0xf0e1;
const TAG_POISON_ID = 0xf0e2;
const TAG_POISON_ENTRY = 0xf0e3;
const TAG_POISON_ARTIFACT = 0xf0e4;

export interface RequestFaults {
  latencyMs: number;
  /** Status to answer instead of handling the request, if any. */
  status: 429 | 500 | 502 | 503 | undefined;
  retryAfterSec: number;
  expire: boolean;
  /** Answer 401 "token expired" if the token was presented before (`token-expiry`). */
  expireUsed: boolean;
  /** The export response is cut; `cutFraction` places the cut among the expected lines. */
  cut: boolean;
  cutFraction: number;
  /** The export response ends early but cleanly, after `truncateFraction` of its lines. */
  truncate: TruncateVariant | undefined;
  truncateFraction: number;
  /** The export body stops for `stallMs` after `truncateFraction` of its lines, then drops. */
  stall: boolean;
  stallMs: number;
  /** Identifies the request's content for per-line decisions (same URL → same malformed lines). */
  contentKey: number;
  attempt: number;
}

export class FaultEngine {
  private readonly seed: number;
  private readonly attempts = new Map<string, number>();
  spec: FaultSpec;
  /** Tokens that have been presented before (`token-expiry` spares a token's first use). */
  private readonly usedTokens = new Set<string>();
  /** How many faults of each kind were injected since start (a chaos run reports them). */
  readonly counts = new Map<FaultKind, number>();

  constructor(seed: number, spec: FaultSpec) {
    this.seed = seed >>> 0;
    this.spec = spec;
  }

  /**
   * Whether the token was presented before (and notes that it now has been): the `token-expiry`
   * fault spares a token's first use, since a real service does not declare a token it has just
   * issued expired, and a client that exchanged a new token after a 401 must be able to go on.
   */
  usedBefore(token: string): boolean {
    if (this.usedTokens.has(token)) return true;
    if (this.usedTokens.size >= MAX_TRACKED_URLS) this.usedTokens.clear();
    this.usedTokens.add(token);
    return false;
  }

  /** Forgets how often each URL was asked: 5xx bursts may strike URLs already asked again. */
  restartBursts(): void {
    this.attempts.clear();
  }

  count(kind: FaultKind, n = 1): void {
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + n);
  }

  /** Decides the request-level faults of one request; counts attempts per method + URL. */
  decide(method: string, url: string, spec: FaultSpec): RequestFaults {
    const key = `${method} ${url}`;
    // A long-running simulator sees endless distinct URLs; forgetting them all at once now and
    // then keeps memory bounded at the price of restarting the attempt counts.
    if (this.attempts.size >= MAX_TRACKED_URLS) this.attempts.clear();
    const attempt = this.attempts.get(key) ?? 0;
    this.attempts.set(key, attempt + 1);
    const k = stringHash(key);
    const roll = (tag: number, n: number) => unit(hash4(this.seed, k, n, tag));
    let status: RequestFaults['status'];
    const se = spec.serverError;
    if (se && se.p > 0 && attempt < se.burst && roll(TAG_5XX, 0) < se.p) {
      status = ([503, 500, 502] as const)[attempt % 3];
    } else if (spec.throttle && roll(TAG_429, attempt) < spec.throttle.p) {
      status = 429;
    }
    const truncated = (spec.truncate ?? 0) > 0 && roll(TAG_TRUNCATE, attempt) < (spec.truncate ?? 0);
    const stall = !truncated && spec.stall !== undefined && roll(TAG_STALL, attempt) < spec.stall.p;
    return {
      latencyMs: spec.latencyMs ?? 0,
      status,
      retryAfterSec: spec.throttle?.retryAfterSec ?? 1,
      expire: (spec.expire ?? 0) > 0 && roll(TAG_EXPIRE, attempt) < (spec.expire ?? 0),
      expireUsed: (spec.tokenExpiry ?? 0) > 0 && roll(TAG_EXPIRE, attempt) < (spec.tokenExpiry ?? 0),
      cut: (spec.cut ?? 0) > 0 && roll(TAG_CUT, attempt) < (spec.cut ?? 0),
      cutFraction: roll(TAG_CUT_AT, attempt),
      truncate: truncated
        ? TRUNCATE_VARIANTS[hash4(this.seed, k, attempt, TAG_TRUNCATE) % TRUNCATE_VARIANTS.length]
        : undefined,
      truncateFraction: roll(TAG_TRUNCATE_AT, attempt),
      stall,
      stallMs: spec.stall?.ms ?? 0,
      contentKey: stringHash(url),
      attempt,
    };
  }

  malformedAt(contentKey: number, line: number, p: number): number | undefined {
    const h = hash4(this.seed, contentKey, line, TAG_MALFORMED);
    return unit(h) < p ? hash4(h, 1, 2, 3) : undefined;
  }

  duplicateAt(contentKey: number, line: number, p: number): boolean {
    return unit(hash4(this.seed, contentKey, line, TAG_DUP)) < p;
  }

  deleteAfterExport(threadId: string, p: number): boolean {
    return unit(hash4(this.seed, stringHash(threadId.toLowerCase()), 0, TAG_DELETE)) < p;
  }

  /** The poison line put before line `line` of `day`'s export (days since epoch), if any. */
  poisonLineAt(day: number, line: number, p: number): string | undefined {
    if (p <= 0) return undefined;
    const h = hash4(this.seed, day, line, TAG_POISON);
    if (unit(h) >= p) return undefined;
    return poisonLine(day, itemAt(POISON_LINE_KINDS, hash4(h, 7, 7, 7) % POISON_LINE_KINDS.length), (w) =>
      uuidFromHash(this.seed, day, line * 4 + w, TAG_POISON_ID),
    );
  }

  /** The line of a record in another spelling (FaultSpec.respell), or undefined to keep it. */
  respelled(line: string, p: number): string | undefined {
    if (p <= 0) return undefined;
    const rec = JSON.parse(line) as Record<string, unknown>;
    const id = rec['Message ID'];
    if (typeof id !== 'string') return undefined;
    const h = hash4(this.seed, stringHash(id.toLowerCase()), 0, TAG_RESPELL);
    if (unit(h) >= p) return undefined;
    return respellLine(line, id, h, uuidFromHash(this.seed, stringHash(id), 1, TAG_RESPELL));
  }

  /** The unstorable value a user history entry carries, if any. */
  poisonEntry(messageId: string, p: number): PoisonKind | undefined {
    return this.poisonValue(stringHash(messageId.toLowerCase()), TAG_POISON_ENTRY, p);
  }

  /** The unstorable value an artifact carries, if any. */
  poisonArtifact(artifactId: string, p: number): PoisonKind | undefined {
    return this.poisonValue(stringHash(artifactId), TAG_POISON_ARTIFACT, p);
  }

  private poisonValue(key: number, tag: number, p: number): PoisonKind | undefined {
    if (p <= 0) return undefined;
    const h = hash4(this.seed, key, 0, tag);
    if (unit(h) >= p) return undefined;
    return (h & 1) === 0 ? 'deep-nesting' : 'huge-number';
  }
}

/** Levels of nesting of the deep-nesting poison: far beyond what a JSON column should take. */
export const POISON_DEPTH = 10_000;
/** A number no double, and no PostgreSQL numeric, can hold (numeric stops at 131,072 digits). */
export const POISON_NUMBER = '1e200000';

/** JSON text of the poison value of a kind (a JSON document no JS value renders). */
export function poisonValueText(kind: PoisonKind): string {
  return kind === 'deep-nesting' ? `${'['.repeat(POISON_DEPTH)}${']'.repeat(POISON_DEPTH)}` : POISON_NUMBER;
}

/**
 * A poison export line: each field a loader checks is well-formed except one thing, so only a
 * loader that validates all of it quarantines the line. Ids are fresh: a loader that let the line
 * through would add a row the ground truth does not have.
 */
function poisonLine(day: number, kind: PoisonKind, id: (which: number) => string): string {
  if (kind === 'blank') return ' \t  \t ';
  const date = dayToString(day);
  const time = kind === 'impossible-date' ? `${date.slice(0, 4)}-02-30T12:00:00Z` : `${date}T12:00:00Z`;
  const head = `{"Input":"poison ${kind}","Response":"poison","Message ID":"${id(0)}","Message Time":"${time}","Thread ID":"${id(1)}","User ID":"${id(2)}"`;
  if (kind === 'deep-nesting') return `${head},"Trace":${poisonValueText(kind)}}`;
  if (kind === 'huge-number') return `${head},"Score":${POISON_NUMBER}}`;
  return `${head}}`;
}

/** `\uXXXX` of a character. */
function escapeChar(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/**
 * A record's line `line` (JSON.stringify of it, id `id`) in another spelling JSON.parse reads as
 * the same record, by `h`: a decoy id under the plain key first and the real one under an escaped
 * key last (the last of duplicated keys wins), the named keys written with escapes, the id's
 * first character escaped, or tabs around the id's colon.
 */
export function respellLine(line: string, id: string, h: number, decoy: string): string {
  const idField = `"Message ID":${JSON.stringify(id)}`;
  switch (h % 4) {
    case 0:
      return `{"Message ID":"${decoy}",${line.slice(1, -1).replace(idField, `"Message${escapeChar(' ')}ID":${JSON.stringify(id)}`)}}`;
    case 1:
      return line
        .replace('"Message ID"', `"${escapeChar('M')}essage ID"`)
        .replace('"Message Time"', `"Message${escapeChar(' ')}Time"`);
    case 2:
      return line.replace(idField, `"Message ID":"${escapeChar(id.charAt(0))}${id.slice(1)}"`);
    default:
      return line.replace(idField, `"Message ID"\t:\t${JSON.stringify(id)}`);
  }
}

/**
 * A broken line made from a good one, of one of the kinds a real export might carry: cut-off JSON,
 * not JSON at all, a record missing a field, a time without offset, an id not in UUID form.
 */
export function malformLine(line: string, h: number): string {
  switch (h % 5) {
    case 0:
      return line.slice(0, Math.max(1, Math.floor(line.length / 2)));
    case 1:
      return '<html><body>502 Bad Gateway</body></html>';
    case 2: {
      const rec = JSON.parse(line) as Record<string, unknown>;
      delete rec['User ID'];
      return JSON.stringify(rec);
    }
    case 3: {
      const rec = JSON.parse(line) as Record<string, unknown>;
      rec['Message Time'] = String(rec['Message Time']).replace(/(Z|[+-]\d{2}:\d{2})$/, '');
      return JSON.stringify(rec);
    }
    default: {
      const rec = JSON.parse(line) as Record<string, unknown>;
      rec['Message ID'] = `msg-${String(rec['Message ID']).slice(0, 8)}`;
      return JSON.stringify(rec);
    }
  }
}
