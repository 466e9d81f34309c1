import { parseOffsetTime } from '../common/iso-time.ts';
import { STORED_KEY_BYTES, STORED_KEY_UNITS_WITHIN } from '../common/stored-key.ts';
import { type CitationFields, parseCitations } from './citation.ts';
import { notStorable } from './storable.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The text of the entry spec §3/§4.8 says a cancel records. */
export const CANCELLED_TEXT = 'User cancelled';

export interface ParsedEntry {
  message_id: string;
  role: string | null;
  text: string | null;
  created_at: string | null;
  is_cancelled: boolean;
  citations: CitationFields[];
  /** Artifact ids the entry names (simulator field `artifact_ids`; spec: "tied to" the message). */
  artifact_ids: string[];
  raw: Record<string, unknown>;
}

export type EntryResult = { ok: true; value: ParsedEntry } | { ok: false; code: string; reason: string };

const bad = (code: string, reason: string): EntryResult => ({ ok: false, code, reason });

function optionalString(o: Record<string, unknown>, keys: string[]): { v: string | null; bad?: string } {
  for (const k of keys) {
    const v = o[k];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') return { v: null, bad: `${k} is not a string` };
    return { v };
  }
  return { v: null };
}

/**
 * One history entry (spec §2 "Message"): message_id (UUID form, the warehouse key) and citations
 * are the contract; role, text (`content`, or `text`), created time (`created_at`) are the
 * well-known fields the simulator and common chat APIs use, extracted when present and of the
 * right type. The whole entry is kept in `raw`.
 */
export function parseHistoryEntry(entry: unknown): EntryResult {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
    return bad('history_not_object', 'the history entry is not a JSON object');
  }
  const o = entry as Record<string, unknown>;
  const unstorable = notStorable(o, { keys: true });
  if (unstorable) return bad(`history_${unstorable.code}`, `the entry contains ${unstorable.what}`);
  if (typeof o.message_id !== 'string' || o.message_id === '') {
    return bad('history_missing_message_id', 'message_id is missing or not a string');
  }
  if (!UUID.test(o.message_id)) return bad('history_invalid_message_id', 'message_id is not in UUID form');
  const role = optionalString(o, ['role']);
  if (role.bad) return bad('history_invalid_field', role.bad);
  const text = optionalString(o, ['content', 'text']);
  if (text.bad) return bad('history_invalid_field', text.bad);
  const created = optionalString(o, ['created_at', 'timestamp']);
  if (created.bad) return bad('history_invalid_field', created.bad);
  let createdAt: string | null = null;
  if (created.v !== null) {
    const t = parseOffsetTime(created.v);
    if (!t.ok) return bad('history_invalid_time', `created_at: ${t.reason}`);
    createdAt = t.utc;
  }
  const citations = parseCitations(o.citations);
  if (!citations.ok) return bad('history_invalid_citation', citations.reason);
  const ids = o.artifact_ids ?? [];
  if (!Array.isArray(ids) || ids.some((a) => typeof a !== 'string' || a === '')) {
    return bad('history_invalid_field', 'artifact_ids is not an array of strings');
  }
  // An artifact id is a key of `artifacts` and `citations` and part of a URL: not one to cut.
  if (
    ids.some((a: string) => a.length > STORED_KEY_UNITS_WITHIN && Buffer.byteLength(a) > STORED_KEY_BYTES)
  ) {
    return bad('history_invalid_field', `artifact_ids holds an id longer than ${STORED_KEY_BYTES} bytes`);
  }
  const isCancelled = text.v?.trim() === CANCELLED_TEXT || o.status === 'cancelled';
  return {
    ok: true,
    value: {
      message_id: o.message_id.toLowerCase(),
      role: role.v,
      text: text.v,
      created_at: createdAt,
      is_cancelled: isCancelled,
      citations: citations.value,
      artifact_ids: [...new Set(ids as string[])],
      raw: o,
    },
  };
}
