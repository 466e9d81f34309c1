import { RECORD_LIMITS } from '../common/record-limits.ts';

// JSON.stringify writes U+0000 as \u0000 and a lone surrogate as its escape \udXXX (lower-case
// hex; a surrogate pair is written as itself). An odd number of backslashes before `u` is such an
// escape; an even number is literal backslashes followed by the text.
const NUL_ESCAPE = /(?<!\\)(?:\\\\)*\\u0000/;
const LONE_SURROGATE_ESCAPE = /(?<!\\)(?:\\\\)*\\ud[89a-f][0-9a-f]{2}/;

export type NotStorable = {
  code:
    | 'nul_character'
    | 'lone_surrogate'
    | 'nesting_too_deep'
    | 'number_out_of_range'
    | 'key_too_long'
    | 'too_many_keys';
  what: string;
};

/**
 * Levels of nesting an entry or artifact may have (itself being level 1), the export record's
 * limit: JSON.stringify throws RangeError a few thousand levels down, which failed the thread's
 * page on every attempt.
 */
export const MAX_DEPTH: number = RECORD_LIMITS.maxDepth;

/**
 * The export record's key limits, on an entry's or artifact's keys at any depth: a key at most
 * 1024 bytes of UTF-8, at most 10,000 keys. Its keys are the paths of its schema drift, and a
 * record of keys that long or that many is a payload, not fields: quarantined like such a line.
 */
export const MAX_KEY_BYTES: number = RECORD_LIMITS.maxKeyBytes;
export const MAX_KEYS: number = RECORD_LIMITS.maxKeys;
/** A key of at most this many UTF-16 units is within MAX_KEY_BYTES unmeasured (≤ 3 bytes a unit). */
const KEY_UNITS_WITHIN = Math.floor(MAX_KEY_BYTES / 3);

/**
 * The first shape problem of `v` without ever going deeper than MAX_DEPTH: too deep, or a number
 * JSON.parse turned into ±Infinity (1e400), which JSON.stringify would silently write as null;
 * with `keys` (the keys counted so far), a key or keys beyond the limits above.
 */
function shapeProblem(v: object, depth: number, keys?: { n: number }): NotStorable | undefined {
  if (depth > MAX_DEPTH) {
    return { code: 'nesting_too_deep', what: `nesting deeper than ${MAX_DEPTH} levels` };
  }
  if (keys !== undefined && !Array.isArray(v)) {
    for (const k in v) {
      if (++keys.n > MAX_KEYS) return { code: 'too_many_keys', what: `more than ${MAX_KEYS} keys` };
      if (k.length > KEY_UNITS_WITHIN && Buffer.byteLength(k) > MAX_KEY_BYTES) {
        return {
          code: 'key_too_long',
          what: `a key of ${Buffer.byteLength(k)} bytes of UTF-8, more than ${MAX_KEY_BYTES} (${JSON.stringify(k.slice(0, 40))}…)`,
        };
      }
    }
  }
  for (const c of Array.isArray(v) ? v : Object.values(v)) {
    if (typeof c === 'object') {
      if (c === null) continue;
      const bad = shapeProblem(c, depth + 1, keys);
      if (bad) return bad;
    } else if (typeof c === 'number' && !Number.isFinite(c)) {
      return {
        code: 'number_out_of_range',
        what: 'a number beyond the range of a double (it would be stored as null)',
      };
    }
  }
  return undefined;
}

/**
 * What PostgreSQL cannot store, anywhere in `v` (keys included): nesting beyond MAX_DEPTH, a
 * number that is not finite, U+0000 (neither text nor jsonb holds it) and a lone UTF-16 surrogate
 * (not Unicode: jsonb and json_to_recordset refuse its escape). A record holding any could never
 * be written as it is and would fail its page on every attempt, so it is quarantined instead.
 * With `{ keys: true }` (an entry, an artifact; not the JSON of an artifact's `val`, whose keys
 * are data) also keys beyond MAX_KEY_BYTES or MAX_KEYS.
 */
export function notStorable(v: unknown, opts: { keys?: boolean } = {}): NotStorable | undefined {
  if (typeof v === 'object' && v !== null) {
    const bad = shapeProblem(v, 1, opts.keys === true ? { n: 0 } : undefined);
    if (bad) return bad;
  } else if (typeof v === 'number' && !Number.isFinite(v)) {
    return { code: 'number_out_of_range', what: 'a number beyond the range of a double' };
  }
  const json = JSON.stringify(v) ?? '';
  // The plain searches are much cheaper than the patterns and almost always find nothing.
  if (json.includes('\\u0000') && NUL_ESCAPE.test(json)) {
    return { code: 'nul_character', what: 'U+0000, which PostgreSQL cannot store' };
  }
  if (json.includes('\\ud') && LONE_SURROGATE_ESCAPE.test(json)) {
    return {
      code: 'lone_surrogate',
      what: 'a lone UTF-16 surrogate, which is not Unicode and PostgreSQL cannot store',
    };
  }
  return undefined;
}

/**
 * A free text from the service (a thread name, an error) as PostgreSQL can store it: U+0000 and
 * lone surrogates, which PostgreSQL refuses (in text, and as json escapes), become U+FFFD. Such
 * texts are not records to quarantine; entries and artifacts that hold them are (notStorable).
 */
export function storableText(s: string): string {
  const t = s.toWellFormed();
  return t.includes('\u0000') ? t.replaceAll('\u0000', '\uFFFD') : t;
}

/**
 * The quarantine's `raw` text of an entry or artifact: its JSON, with anything nested deeper than
 * MAX_DEPTH replaced by a marker (JSON.stringify would throw on a very deep value, and the reject
 * would fail its page like the value itself).
 */
export function rawText(v: unknown): string {
  const depths = new WeakMap<object, number>();
  return (
    JSON.stringify(v, function (this: unknown, _key: string, value: unknown) {
      if (typeof value !== 'object' || value === null) return value;
      const holder = this as object;
      const depth = (depths.get(holder) ?? 0) + 1;
      if (depth > MAX_DEPTH) return `[nested deeper than ${MAX_DEPTH} levels: not kept]`;
      depths.set(value, depth);
      return value;
    }) ?? String(v)
  );
}
