import { redactText } from '../log.ts';

/**
 * Schema drift: where what the service sends differs from the contract the code knows (an export
 * line, a thread-list entry, a history entry, an artifact). The parsers note it; the warehouse
 * keeps it (src/warehouse/schema-drift.ts); `crs-sync schema changes` lists it.
 */

export type DriftSource = 'export' | 'thread' | 'history' | 'artifact';
export const DRIFT_SOURCES: readonly DriftSource[] = ['export', 'thread', 'history', 'artifact'];

export type DriftKind = 'new_field' | 'missing_field' | 'type_changed';
export const DRIFT_KINDS: readonly DriftKind[] = ['new_field', 'missing_field', 'type_changed'];

/** A JSON value's type as the contract names it. */
export type JsonType = 'string' | 'number' | 'boolean' | 'null' | 'object' | 'array';

export function jsonType(v: unknown): JsonType {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  const t = typeof v;
  // A number kept as its source digits (JSON.rawJSON) is an object too; asked by what V8 made it,
  // not by its key: an object the service sent with a key "rawJSON" is still an object.
  if (t === 'object' && rawJson.isRawJSON(v)) return 'number';
  return t === 'string' || t === 'number' || t === 'boolean' ? t : 'object';
}

// JSON.isRawJSON exists in Node 24 (V8) but not yet in the es2024 lib typings.
const rawJson = JSON as unknown as { isRawJSON(v: unknown): boolean };

/** One difference a value showed against the contract. */
export interface DriftNote {
  source: DriftSource;
  /** Top-level key, or `parent[].key` for a key of the objects of an array field. */
  path: string;
  kind: DriftKind;
  /** The contract's type(s), `|`-joined; null for a new field. */
  expected: string | null;
  /** The type received; null for a missing field. */
  actual: JsonType | null;
  /** A short rendering of the value received (driftExample); null for a missing field. */
  example: string | null;
}

const EXAMPLE_CHARS = 60;
// A field whose name says it holds a credential shows no value at all.
const SECRET_NAME = /(token|secret|passw|api[-_ ]?key|authori[sz]ation|cookie|credential|session)/i;

/**
 * The example kept with a drift: the value's JSON, at most 60 characters, with anything that looks
 * like a credential masked (src/log.ts); the whole value masked when its field's name says it is a
 * secret.
 */
export function driftExample(path: string, v: unknown): string {
  if (SECRET_NAME.test(path)) return '[redacted]';
  let text: string;
  try {
    text = JSON.stringify(v) ?? String(v);
  } catch {
    // Nested beyond what JSON.stringify can walk.
    text = Array.isArray(v) ? '[…]' : '{…}';
  }
  const cut = text.length > EXAMPLE_CHARS ? `${text.slice(0, EXAMPLE_CHARS)}…` : text;
  return redactText(cut).replaceAll('\u0000', '\\u0000').toWellFormed();
}

/** The key of a drift: one row per source, path and kind. */
export function driftKey(n: Pick<DriftNote, 'source' | 'path' | 'kind'>): string {
  return `${n.source}\u0000${n.path}\u0000${n.kind}`;
}

/**
 * Drift that an operator accepted: the contract widened by it (`crs-sync schema accept`). A new
 * field accepted is a known field of any type from then on; a type change accepted adds its type.
 */
export interface AcceptedDrift {
  source: DriftSource;
  path: string;
  kind: DriftKind;
  /** The type accepted with a type change (null: any). */
  actual: string | null;
}
