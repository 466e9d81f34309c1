import { parseOffsetTime } from './iso-time.ts';
import type { LineProblem } from './line-splitter.ts';
import { recordHash } from './record-hash.ts';

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
  | 'invalid_utf8';

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
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

const MAX_DETAIL = 300;
const MAX_QUOTED = 80;

// JSON.rawJSON and the reviver's source context exist in Node 24 (V8) but not in the es2024 typings.
type SourceReviver = (this: unknown, key: string, value: unknown, context: { source?: string }) => unknown;
const json = JSON as unknown as {
  parse(text: string, reviver: SourceReviver): unknown;
  rawJSON(text: string): unknown;
};

/**
 * Parses one line of the analytics export (service-api.md §2, "Message analytics record").
 *
 * - One JSON.parse. For a duplicated key the last occurrence wins (JSON.parse semantics); the
 *   duplicate is not detected.
 * - The six named keys must be present and strings. Ids: 8-4-4-4-12 hex in any case, stored
 *   lower-case; braces, `urn:uuid:` and the 32-digit form are rejected. No version check.
 * - Message Time: see iso-time.ts (offset required; converted to UTC; leap second rejected).
 * - Text PostgreSQL cannot store (U+0000, a lone surrogate) anywhere, keys of `extra` included,
 *   gives `text_not_storable` with the path of the first such string.
 * - `recordHash` is left '' with `{ hash: false }`, for a caller that computes it later.
 * - `extra` keeps other keys verbatim. A number JSON.parse cannot hold exactly (an integer beyond
 *   2^53, a decimal beyond double precision) is kept as its source text via JSON.rawJSON, so
 *   JSON.stringify(extra) writes the original digits. `extra` has a null prototype so that a key
 *   named "__proto__" stays data.
 */
export function parseRecord(text: string, opts: { hash?: boolean } = {}): ParseResult {
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
      const missing = NAMED.filter((n) => !Object.hasOwn(obj, n)).map((n) => JSON.stringify(n));
      return reject('missing_field', `missing ${missing.join(', ')}`);
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

  if (!UUID.test(rawMessageId))
    return reject('invalid_uuid', `"Message ID": not a UUID: ${quote(rawMessageId)}`);
  if (!UUID.test(rawThreadId))
    return reject('invalid_uuid', `"Thread ID": not a UUID: ${quote(rawThreadId)}`);
  if (!UUID.test(rawUserId)) return reject('invalid_uuid', `"User ID": not a UUID: ${quote(rawUserId)}`);

  const time = parseOffsetTime(rawTime);
  if (!time.ok) return reject(time.code, `"Message Time": ${time.reason}: ${quote(rawTime)}`);

  let extra: Record<string, unknown> | null = null;
  let inexactNumber = false;
  for (const k in obj) {
    if (NAMED_SET.has(k)) continue;
    extra ??= Object.create(null) as Record<string, unknown>;
    const v = obj[k];
    extra[k] = v;
    if (!inexactNumber && typeof v !== 'string' && v !== null) inexactNumber = hasInexactNumber(v);
  }

  // Without a \u escape and with well-formed text, no parsed string can hold U+0000 (a raw
  // control character is invalid JSON) or a lone surrogate: the common case skips the walk.
  if (text.includes('\\u') || !text.isWellFormed()) {
    const bad =
      storableProblem('"Input"', input) ??
      storableProblem('"Response"', response) ??
      (extra === null ? undefined : unstorableIn(extra, ''));
    if (bad !== undefined) return reject('text_not_storable', bad);
  }

  if (inexactNumber) extra = extraWithExactNumbers(text);

  const messageId = rawMessageId.toLowerCase();
  const threadId = rawThreadId.toLowerCase();
  const userId = rawUserId.toLowerCase();
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

function hasInexactNumber(v: unknown): boolean {
  if (typeof v === 'number') return !Number.isSafeInteger(v);
  if (typeof v !== 'object' || v === null) return false;
  for (const child of Array.isArray(v) ? v : Object.values(v)) {
    if (hasInexactNumber(child)) return true;
  }
  return false;
}

// The rare slow path: parse again, keeping the source text of numbers that would not survive.
function extraWithExactNumbers(text: string): Record<string, unknown> {
  const obj = json.parse(text, (_key, value, context) => {
    if (typeof value === 'number' && context.source !== undefined && String(value) !== context.source) {
      return json.rawJSON(context.source);
    }
    return value;
  }) as Record<string, unknown>;
  const extra = Object.create(null) as Record<string, unknown>;
  for (const k in obj) if (!NAMED_SET.has(k)) extra[k] = obj[k];
  return extra;
}
