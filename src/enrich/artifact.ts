import { type CitationFields, parseCitations } from './citation.ts';
import { notStorable } from './storable.ts';

export interface ParsedArtifact {
  output_type: string | null;
  title: string | null;
  val: string | null;
  /** `val` parsed, when it is a JSON object or array (table and chart artifacts). */
  val_json: unknown;
  resolved_text_objects: boolean | null;
  citations: CitationFields[];
  raw: Record<string, unknown>;
}

export type ArtifactParse = { ok: true; value: ParsedArtifact } | { ok: false; code: string; reason: string };

/** Checks an artifact against spec §2: each named field, when present, has its type. */
export function parseArtifact(a: Record<string, unknown>): ArtifactParse {
  const unstorable = notStorable(a, { keys: true });
  if (unstorable) {
    return {
      ok: false,
      code: `artifact_${unstorable.code}`,
      reason: `the artifact contains ${unstorable.what}`,
    };
  }
  const problems: string[] = [];
  const s = (k: string): string | null => {
    const v = a[k];
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string') problems.push(`${k} is not a string`);
    return typeof v === 'string' ? v : null;
  };
  const output_type = s('output_type');
  const title = s('title');
  const val = s('val');
  const rto = a.resolved_text_objects;
  if (rto !== undefined && rto !== null && typeof rto !== 'boolean') {
    problems.push('resolved_text_objects is not a boolean');
  }
  const citations = parseCitations(a.citations);
  if (!citations.ok) problems.push(citations.reason);
  if (problems.length > 0 || !citations.ok) {
    return { ok: false, code: 'artifact_invalid', reason: problems.join('; ') };
  }
  let val_json: unknown = null;
  if (val !== null && /^\s*[[{]/.test(val)) {
    try {
      val_json = JSON.parse(val);
    } catch {
      val_json = null;
    }
    // `val` may escape what jsonb cannot hold (\u0000, a lone \ud800): the text keeps it all.
    if (val_json !== null && notStorable(val_json)) val_json = null;
  }
  return {
    ok: true,
    value: {
      output_type,
      title,
      val,
      val_json,
      resolved_text_objects: typeof rto === 'boolean' ? rto : null,
      citations: citations.value,
      raw: a,
    },
  };
}
