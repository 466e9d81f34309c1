import { parseOffsetTime } from '../../common/iso-time.ts';
import { RECORD_LIMITS } from '../../common/record-limits.ts';
import { type DriftNote, driftExample, type JsonType, jsonType } from '../../common/schema-drift.ts';
import { STORED_KEY_UNITS_WITHIN, storedKey } from '../../common/stored-key.ts';
import type { LineProblem } from './line-splitter.ts';
import { recordHash } from './record-hash.ts';
import { uuidForm } from './uuid-form.ts';

export type RejectCode =
  | 'invalid_json'
  | 'not_an_object'
  | 'missing_field'
  | 'wrong_type'
  | 'invalid_uuid'
  | 'time_without_offset'
  | 'invalid_time'
  | 'impossible_date'
  | 'text_not_storable'
  | 'line_too_long'
  | 'invalid_utf8'
  | 'nesting_too_deep'
  | 'number_out_of_range'
  | 'key_too_long'
  | 'too_many_keys'
  | 'schema_drift';

// The export's limits, the same as enrichment's: declared once in src/common.
export { RECORD_LIMITS };

/** A key of at most this many UTF-16 units is within maxKeyBytes unmeasured (a unit is ≤ 3 bytes). */
const KEY_UNITS_WITHIN = Math.floor(RECORD_LIMITS.maxKeyBytes / 3);

/** Whether key `k` is over maxKeyBytes: measured only when its length in units leaves it open. */
function keyTooLongBytes(k: string): boolean {
  return k.length > KEY_UNITS_WITHIN && Buffer.byteLength(k) > RECORD_LIMITS.maxKeyBytes;
}

/** PostgreSQL numeric (and so jsonb): at most 131072 digits before the point, 16383 after it. */
const PG_MAX_INT_DIGITS = 131_072;
const PG_MAX_SCALE = 16_383;

export interface ExportRecord {
  /** Lower-case canonical UUID text. */
  messageId: string;
  threadId: string;
  userId: string;
  /** UTC, `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`: at most 6 fractional digits (truncated), no trailing zeros. */
  messageTime: string;
  /** The UTC calendar date of messageTime, 'YYYY-MM-DD'. */
  messageDate: string;
  input: string;
  response: string;
  /** Every key other than the six named ones, verbatim, in source order; null when none. */
  extra: Record<string, unknown> | null;
  /** sha1 hex of the canonical content, see record-hash.ts. */
  recordHash: string;
}

export type ParseResult =
  | { ok: true; record: ExportRecord }
  | { ok: false; code: RejectCode; detail: string };

/** The reject code for a line the splitter could not hand over as text. */
export function rejectCodeForLineProblem(problem: LineProblem): RejectCode {
  // A raw NUL byte can be neither parsed (JSON forbids it) nor stored as text by PostgreSQL.
  return problem === 'nul_byte' ? 'text_not_storable' : problem;
}

const NAMED = ['Message ID', 'Thread ID', 'User ID', 'Message Time', 'Input', 'Response'] as const;
const NAMED_SET: ReadonlySet<string> = new Set(NAMED);

/** The value of a hex digit's character code (either case), -1 for any other code below 128. */
const MAX_DETAIL = 300;
const MAX_QUOTED = 80;

export interface ParseOptions {
  /** false: leave `recordHash` '' (the loader hashes the encoded bytes, copy-binary.ts). */
  hash?: boolean;
  /**
   * true: `text` was decoded from valid UTF-8 (the line splitter checks every line), so it holds
   * no lone surrogate and only a `\u` escape can put unstorable text into a value: the scan of
   * the whole line for well-formedness is skipped. Wrong when the text did not come from bytes.
   */
  fromUtf8?: boolean;
  /**
   * The contract drift is measured against (default: EXPORT_CONTRACT, evolve); null: no drift
   * detection at all (bench/parse.ts measures what it costs).
   */
  contract?: ExportContract | null;
}

/** Type bits of the contract's type masks. */
const T_STRING = 1;
const T_NUMBER = 2;
const T_BOOLEAN = 4;
const T_NULL = 8;
const T_OBJECT = 16;
const T_ARRAY = 32;
const T_ANY = 63;
const TYPE_BITS: ReadonlyArray<[JsonType, number]> = [
  ['string', T_STRING],
  ['number', T_NUMBER],
  ['boolean', T_BOOLEAN],
  ['null', T_NULL],
  ['object', T_OBJECT],
  ['array', T_ARRAY],
];

/**
 * What the code knows of an export line besides the six named fields: the other keys the service
 * is known to send, each with the JSON types it may carry. A key not listed is a new field, a
 * listed key of another type a type change (schema drift); `freeze` quarantines a line with
 * either (`schema_drift`). Drift is noted only of a line that loads (or is held as
 * `schema_drift`): a line quarantined for another reason, a missing or non-string named field
 * among them, is counted in the quarantine, and its fields are no part of what the service sends.
 */
export interface ExportContract {
  readonly freeze: boolean;
  /** Known keys of `extra` (as stored: `storedKey`) and their type masks (T_ANY: any type). */
  readonly extra: ReadonlyMap<string, number>;
  /**
   * How a record's user id is stored (CRS_USER_ID_POLICY, src/common/pseudonym.ts): its pseudonym,
   * taken before the record is hashed, so a re-load hashes what it stores; undefined: as sent.
   */
  readonly storedUserId?: ((userId: string) => string) | undefined;
}

/** Keys the service sends beside the six (simulator README: "keys the spec does not name"). */
const KNOWN_EXTRA: ReadonlyArray<[string, number]> = [
  ['Model', T_STRING],
  ['Latency Ms', T_NUMBER],
];

/**
 * The contract widened by the accepted paths of `export` drift (`crs-sync schema accept`). A path
 * is looked up as stored (`storedKey`: a long one bounded), so a path accepted in full before
 * paths were bounded still matches.
 */
export function exportContract(
  opts: { freeze?: boolean; accepted?: Iterable<string>; storedUserId?: (userId: string) => string } = {},
): ExportContract {
  const contract = {
    freeze: opts.freeze === true,
    extra: new Map(KNOWN_EXTRA),
    storedUserId: opts.storedUserId,
  };
  return widenContract(contract, opts.accepted ?? []);
}

/** `contract` widened by the accepted paths of `export` drift (as `exportContract` widens its own). */
export function widenContract(contract: ExportContract, accepted: Iterable<string>): ExportContract {
  const extra = new Map(contract.extra);
  for (const path of accepted) if (!NAMED_SET.has(path)) extra.set(storedKey(path), T_ANY);
  return { ...contract, extra };
}

/** The type mask the contract knows key `k` of `extra` by, undefined for a key it does not know. */
function knownTypes(contract: ExportContract, k: string): number | undefined {
  return contract.extra.get(k.length > STORED_KEY_UNITS_WITHIN ? storedKey(k) : k);
}

export const EXPORT_CONTRACT: ExportContract = exportContract();

function typeBit(v: unknown): number {
  switch (typeof v) {
    case 'string':
      return T_STRING;
    case 'number':
      return T_NUMBER;
    case 'boolean':
      return T_BOOLEAN;
    default:
      return v === null ? T_NULL : Array.isArray(v) ? T_ARRAY : T_OBJECT;
  }
}

function typeNames(mask: number): string {
  return TYPE_BITS.filter(([, bit]) => (mask & bit) !== 0)
    .map(([name]) => name)
    .join('|');
}

/**
 * The drift of the line parsed last, empty when it had none. Module-level and reused, like `walk`:
 * a line without drift allocates nothing for it. Read it before the next parse.
 */
const drift: DriftNote[] = [];

export function lastDrift(): readonly DriftNote[] {
  return drift;
}

/**
 * The drift of the keys of `extra` (of the first parse: a number kept as its digits would read as
 * an object), into `drift`. Run only for a line that passed every check and showed drift in the
 * walk: a quarantined line leaves no note.
 */
function noteExtraDrift(obj: Record<string, unknown>, contract: ExportContract): void {
  for (const k in obj) {
    if (NAMED_SET.has(k)) continue;
    const v = obj[k];
    const known = knownTypes(contract, k);
    if (known !== undefined && (known & typeBit(v)) !== 0) continue;
    drift.push({
      source: 'export',
      // Bounded in bytes: the path is a key of schema_drift (src/common/stored-key.ts).
      path: k.length > STORED_KEY_UNITS_WITHIN ? storedKey(k) : k,
      kind: known === undefined ? 'new_field' : 'type_changed',
      expected: known === undefined ? null : typeNames(known),
      actual: jsonType(v),
      example: driftExample(k, v),
    });
  }
}

// JSON.rawJSON and the reviver's source context exist in Node 24 (V8) but not in the es2024 typings.
type SourceReviver = (this: unknown, key: string, value: unknown, context: { source?: string }) => unknown;
const json = JSON as unknown as {
  parse(text: string, reviver: SourceReviver): unknown;
  rawJSON(text: string): unknown;
};

/**
 * Parses one line of the analytics export (spec §2, "Analytics record"; docs/service-contract.md).
 *
 * - One JSON.parse. For a duplicated key the last occurrence wins (JSON.parse semantics); the
 *   duplicate is not detected.
 * - The six named keys must be present and strings. Ids: 8-4-4-4-12 hex in any case, stored
 *   lower-case; braces, `urn:uuid:` and the 32-digit form are rejected. No version check.
 * - Message Time: see src/common/iso-time.ts (offset required; converted to UTC; leap second rejected).
 * - Text PostgreSQL cannot store (U+0000, a lone surrogate) anywhere, keys of `extra` included,
 *   gives `text_not_storable` with the path of the first such string.
 * - `recordHash` is left '' with `{ hash: false }`, for a caller that computes it later.
 * - `{ fromUtf8: true }` skips a check only text not decoded from bytes needs (ParseOptions).
 * - `extra` keeps other keys verbatim. A number JSON.parse cannot hold exactly (an integer beyond
 *   2^53, a decimal beyond double precision) is kept as its source text via JSON.rawJSON, so
 *   JSON.stringify(extra) writes the original digits (a zero too, when the line has a negative
 *   exponent: 1e-400). `extra` has a null prototype so that a key named "__proto__" stays data.
 * - `extra` within RECORD_LIMITS (nesting, key length, key count) and its numbers within
 *   PostgreSQL's numeric, checked in the walk `extra` needs anyway: `nesting_too_deep`,
 *   `key_too_long` (bytes of UTF-8), `too_many_keys`, `number_out_of_range`.
 * - Schema drift (`lastDrift`) is seen in the same walk and noted last, only for a line that passed
 *   every check: a quarantined line leaves none, but for `schema_drift`, whose reason it is. A
 *   drift's path is its key as stored (`storedKey`: over 512 bytes, a prefix and a hash).
 *
 * Long: the contract's checks in the order a record meets them, each a few lines ending in its
 * reject code; it runs once per line on the hot path, so the fields stay in locals.
 */
export function parseRecord(text: string, opts: ParseOptions = {}): ParseResult {
  if (drift.length > 0) drift.length = 0;
  const contract = opts.contract === undefined ? EXPORT_CONTRACT : opts.contract;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return reject('invalid_json', (e as Error).message);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return reject('not_an_object', `expected a JSON object, got ${typeName(value)}`);
  }
  const obj = value as Record<string, unknown>;

  for (const k of NAMED) {
    if (!Object.hasOwn(obj, k)) {
      const missing = NAMED.filter((n) => !Object.hasOwn(obj, n));
      return reject('missing_field', `missing ${missing.map((n) => JSON.stringify(n)).join(', ')}`);
    }
  }
  for (const k of NAMED) {
    const v = obj[k];
    if (typeof v !== 'string') return reject('wrong_type', `"${k}": expected a string, got ${typeName(v)}`);
  }
  const rawMessageId = obj['Message ID'] as string;
  const rawThreadId = obj['Thread ID'] as string;
  const rawUserId = obj['User ID'] as string;
  const rawTime = obj['Message Time'] as string;
  const input = obj.Input as string;
  const response = obj.Response as string;

  const messageForm = uuidForm(rawMessageId);
  if (messageForm === 0) return reject('invalid_uuid', `"Message ID": not a UUID: ${quote(rawMessageId)}`);
  const threadForm = uuidForm(rawThreadId);
  if (threadForm === 0) return reject('invalid_uuid', `"Thread ID": not a UUID: ${quote(rawThreadId)}`);
  const userForm = uuidForm(rawUserId);
  if (userForm === 0) return reject('invalid_uuid', `"User ID": not a UUID: ${quote(rawUserId)}`);

  const time = parseOffsetTime(rawTime);
  if (!time.ok) return reject(time.code, `"Message Time": ${time.reason}: ${quote(rawTime)}`);

  let extra: Record<string, unknown> | null = null;
  let inexactNumber = false;
  let drifted = false;
  walk.keys = 0;
  walk.zero = false;
  walk.problem = undefined;
  for (const k in obj) {
    if (NAMED_SET.has(k)) continue;
    extra ??= Object.create(null) as Record<string, unknown>;
    const v = obj[k];
    extra[k] = v;
    walk.keys++;
    // Schema drift, in the walk `extra` needs anyway: one map lookup per key besides the six. Only
    // seen here; noted once the line has passed every check (noteExtraDrift).
    if (contract !== null && !drifted) {
      const known = knownTypes(contract, k);
      drifted = known === undefined || (known & typeBit(v)) === 0;
    }
    if (keyTooLongBytes(k)) walk.problem ??= keyTooLong(k, quote(k));
    if (typeof v === 'object') {
      if (v !== null) inexactNumber = inspect(v, 2, k) || inexactNumber;
    } else if (typeof v === 'number') {
      if (!Number.isSafeInteger(v)) inexactNumber = true;
      else if (v === 0) walk.zero = true;
    }
  }
  // A zero may be a number too small for a double (1e-400): kept as its digits too, like any
  // number JSON.parse changed. Only a zero costs this look at the text.
  if (walk.zero && !inexactNumber && NEGATIVE_EXPONENT.test(text)) inexactNumber = true;
  if (walk.keys > RECORD_LIMITS.maxKeys) {
    walk.problem ??= {
      code: 'too_many_keys',
      detail: `more than ${RECORD_LIMITS.maxKeys} keys besides the six named fields`,
    };
  }
  // Before any other walk of `extra`: a deeper one could overflow the stack.
  if (walk.problem !== undefined) return reject(walk.problem.code, walk.problem.detail);

  // Without a \u escape and with well-formed text, no parsed string can hold U+0000 (a raw
  // control character is invalid JSON) or a lone surrogate: the common case skips the walk.
  if (text.includes('\\u') || (opts.fromUtf8 !== true && !text.isWellFormed())) {
    const bad =
      storableProblem('"Input"', input) ??
      storableProblem('"Response"', response) ??
      (extra === null ? undefined : unstorableIn(extra, ''));
    if (bad !== undefined) return reject('text_not_storable', bad);
  }

  if (inexactNumber) {
    extra = extraWithExactNumbers(text);
    // Set by the re-parse (a number beyond PostgreSQL's range): TypeScript cannot see that.
    const late = walk.problem as { code: RejectCode; detail: string } | undefined;
    if (late !== undefined) return reject(late.code, late.detail);
  }

  if (drifted && contract !== null) {
    noteExtraDrift(obj, contract);
    // The one reject whose drift is kept: it is the reason, and `schema accept` releases it.
    if (contract.freeze) return reject('schema_drift', driftDetail());
  }

  const messageId = messageForm === 2 ? rawMessageId.toLowerCase() : rawMessageId;
  const threadId = threadForm === 2 ? rawThreadId.toLowerCase() : rawThreadId;
  const sentUserId = userForm === 2 ? rawUserId.toLowerCase() : rawUserId;
  const userId = contract?.storedUserId ? contract.storedUserId(sentUserId) : sentUserId;
  return {
    ok: true,
    record: {
      messageId,
      threadId,
      userId,
      messageTime: time.utc,
      messageDate: time.date,
      input,
      response,
      extra,
      // '' when the caller hashes the record itself (copy-binary.ts, from the encoded bytes).
      recordHash:
        opts.hash === false ? '' : recordHash(messageId, threadId, userId, time.utc, input, response, extra),
    },
  };
}

/** What a frozen contract refused, e.g. `new field "Region" (string)`. */
function driftDetail(): string {
  const parts = drift.map((d) =>
    d.kind === 'new_field'
      ? `new field ${JSON.stringify(d.path)} (${d.actual})`
      : `${JSON.stringify(d.path)}: expected ${d.expected}, got ${d.actual}`,
  );
  return `the record differs from the contract (CRS_RECORD_CONTRACT=freeze): ${parts.join('; ')}`;
}

// Only ever called before drift is noted, but for `schema_drift`: a quarantined line leaves no
// drift (see ExportContract).
function reject(code: RejectCode, detail: string): ParseResult {
  let d = detail.length > MAX_DETAIL ? detail.slice(0, MAX_DETAIL - 1) + '…' : detail;
  // The detail is stored as text too: JSON.parse's message quotes the source, which may hold a
  // NUL, and trimming may split a surrogate pair.
  if (d.includes('\u0000')) d = d.replaceAll('\u0000', '\\u0000');
  return { ok: false, code, detail: d.toWellFormed() };
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  return typeof v === 'string' ? 'a string' : typeof v;
}

function quote(s: string): string {
  return s.length > MAX_QUOTED ? JSON.stringify(s.slice(0, MAX_QUOTED)) + '…' : JSON.stringify(s);
}

function storableProblem(where: string, s: string): string | undefined {
  if (s.includes('\u0000')) return `${where}: contains U+0000 (NUL), which PostgreSQL text cannot store`;
  if (!s.isWellFormed()) return `${where}: contains a lone UTF-16 surrogate, which is not valid Unicode`;
  return undefined;
}

function unstorableIn(v: unknown, path: string): string | undefined {
  if (typeof v === 'string') return storableProblem(path, v);
  if (typeof v !== 'object' || v === null) return undefined;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const bad = unstorableIn(v[i], `${path}[${i}]`);
      if (bad !== undefined) return bad;
    }
    return undefined;
  }
  for (const [k, child] of Object.entries(v)) {
    const keyPath = path === '' ? JSON.stringify(k) : `${path}.${JSON.stringify(k)}`;
    const badKey = storableProblem(`key ${keyPath}`, k);
    if (badKey !== undefined) return badKey;
    const bad = unstorableIn(child, keyPath);
    if (bad !== undefined) return bad;
  }
  return undefined;
}

// The state of one record's walk: module-level so that the common record allocates nothing.
const walk: { keys: number; zero: boolean; problem: { code: RejectCode; detail: string } | undefined } = {
  keys: 0,
  zero: false,
  problem: undefined,
};
const NEGATIVE_EXPONENT = /[0-9][eE]-/;

function keyTooLong(key: string, path: string): { code: RejectCode; detail: string } {
  return {
    code: 'key_too_long',
    detail: `key ${path} is ${Buffer.byteLength(key)} bytes of UTF-8, more than ${RECORD_LIMITS.maxKeyBytes}`,
  };
}

/**
 * Checks a container of `extra` at `depth` against RECORD_LIMITS, stopping at the first problem
 * (left in `walk.problem`) and never going deeper than the limit; returns whether it holds a
 * number JSON.parse could not hold exactly. Part of the one walk `extra` always had.
 */
function inspect(v: object, depth: number, topKey: string): boolean {
  if (depth > RECORD_LIMITS.maxDepth) {
    walk.problem ??= {
      code: 'nesting_too_deep',
      detail: `nested more than ${RECORD_LIMITS.maxDepth} levels deep (in key ${quote(topKey)})`,
    };
    return false;
  }
  let inexact = false;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const c: unknown = v[i];
      if (typeof c === 'object') {
        if (c !== null && inspect(c, depth + 1, topKey)) inexact = true;
      } else if (typeof c === 'number') {
        if (!Number.isSafeInteger(c)) inexact = true;
        else if (c === 0) walk.zero = true;
      }
      if (walk.problem !== undefined) return inexact;
    }
    return inexact;
  }
  for (const k in v) {
    walk.keys++;
    if (keyTooLongBytes(k)) {
      walk.problem ??= keyTooLong(k, `${quote(topKey)}…${quote(k)}`);
      return inexact;
    }
    const c: unknown = (v as Record<string, unknown>)[k];
    if (typeof c === 'object') {
      if (c !== null && inspect(c, depth + 1, topKey)) inexact = true;
    } else if (typeof c === 'number') {
      if (!Number.isSafeInteger(c)) inexact = true;
      else if (c === 0) walk.zero = true;
    }
    if (walk.problem !== undefined) return inexact;
  }
  if (walk.keys > RECORD_LIMITS.maxKeys) {
    walk.problem ??= {
      code: 'too_many_keys',
      detail: `more than ${RECORD_LIMITS.maxKeys} keys besides the six named fields`,
    };
  }
  return inexact;
}

/**
 * Whether PostgreSQL's numeric (jsonb's number type) can hold the JSON number `src`, checked on
 * its digits as numeric_in reads them: the scale (digits after the point, the exponent applied)
 * at most 16383, a non-zero value's integer digits at most 131072. A zero's exponent only moves
 * its scale. Only numbers a double cannot hold exactly get here: every double is in range.
 */
export function numericInRange(src: string): boolean {
  let i = src.charCodeAt(0) === 45 ? 1 : 0; // '-'
  let intDigits = 0; // significant: after leading zeros
  let fracDigits = 0;
  let leadingFracZeros = 0;
  let nonZero = false;
  for (; i < src.length; i++) {
    const c = src.charCodeAt(i);
    if (c < 48 || c > 57) break;
    if (c !== 48 || nonZero) {
      nonZero = true;
      intDigits++;
    }
  }
  if (src.charCodeAt(i) === 46) {
    for (i++; i < src.length; i++) {
      const c = src.charCodeAt(i);
      if (c < 48 || c > 57) break;
      fracDigits++;
      if (!nonZero) {
        if (c === 48) leadingFracZeros++;
        else nonZero = true;
      }
    }
  }
  let exp = 0;
  if (i < src.length) {
    // 'e' or 'E', an optional sign, digits (JSON.parse has checked the form)
    i++;
    const neg = src.charCodeAt(i) === 45;
    if (neg || src.charCodeAt(i) === 43) i++;
    const digits = src.slice(i).replace(/^0+/, '');
    // numeric_in refuses an exponent beyond INT_MAX / 2 even on a zero.
    if (digits.length > 10) return false;
    exp = Number(digits === '' ? '0' : digits);
    if (exp >= 1_073_741_823) return false;
    if (neg) exp = -exp;
  }
  if (Math.max(0, fracDigits - exp) > PG_MAX_SCALE) return false;
  if (!nonZero) return true;
  // Decimal digits before the point: of the leading digit's position, with the exponent applied.
  const position = intDigits > 0 ? intDigits + exp : exp - leadingFracZeros;
  return position <= PG_MAX_INT_DIGITS;
}

// The rare slow path: parse again, keeping the source text of numbers that would not survive.
function extraWithExactNumbers(text: string): Record<string, unknown> {
  const obj = json.parse(text, (_key, value, context) => {
    if (typeof value === 'number' && context.source !== undefined && String(value) !== context.source) {
      if (!numericInRange(context.source)) {
        walk.problem ??= {
          code: 'number_out_of_range',
          detail: `the number ${context.source.length > MAX_QUOTED ? context.source.slice(0, MAX_QUOTED) + '…' : context.source} is beyond what PostgreSQL's numeric can hold`,
        };
      }
      return json.rawJSON(context.source);
    }
    return value;
  }) as Record<string, unknown>;
  const extra = Object.create(null) as Record<string, unknown>;
  for (const k in obj) if (!NAMED_SET.has(k)) extra[k] = obj[k];
  return extra;
}
