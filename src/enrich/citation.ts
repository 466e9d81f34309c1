import { parseOffsetTime } from '../common/iso-time.ts';
import { storedKey } from '../common/stored-key.ts';
import type { PageCitationRow } from '../warehouse/enrich-pages.ts';

/** The eight citation fields spec §2 names; everything else of a citation goes to `extra`. */
const SPEC_FIELDS = [
  'id',
  'internal_id',
  'citation_type',
  'name',
  'inline_offset',
  'summary',
  'last_updated_at',
  'is_snippet',
] as const;

const MAX_INT4 = 2_147_483_647;

/**
 * A citation as read from an entry or artifact: the columns of its `citations` row, but for
 * where it stands (owner, position) and the load, which the page's rows add (page-rows.ts).
 */
export type CitationFields = Omit<
  PageCitationRow,
  'owner_kind' | 'owner_id' | 'ordinal' | 'message_id' | 'artifact_id' | 'thread_id' | 'load_id'
>;

export type CitationResult = { ok: true; value: CitationFields } | { ok: false; reason: string };

/**
 * A citation's type or name as stored: both are keys of an index and of the citation rollups, so
 * one over 512 bytes is cut to a prefix and a hash of it (`storedKey`); the entry's or artifact's
 * `raw` keeps it whole.
 */
function keyStr(c: Record<string, unknown>, k: string, problems: string[]): string | null {
  const v = str(c, k, problems);
  return v === null ? null : storedKey(v);
}

function str(c: Record<string, unknown>, k: string, problems: string[]): string | null {
  const v = c[k];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') problems.push(`${k} is not a string`);
  return typeof v === 'string' ? v : null;
}

/**
 * Checks one citation against spec §2: each named field, when present, has its type (strings,
 * integer inline_offset from 0 to 2³¹−1, boolean is_snippet, last_updated_at an ISO 8601 time
 * with offset). Absent fields are allowed (the spec marks none required).
 */
export function parseCitation(c: unknown): CitationResult {
  if (c === null || typeof c !== 'object' || Array.isArray(c))
    return { ok: false, reason: 'is not an object' };
  const o = c as Record<string, unknown>;
  const problems: string[] = [];
  const offset = o.inline_offset;
  // The column is a Postgres integer: a larger offset could never be stored and would fail its
  // page on every attempt, so it breaks the contract here instead.
  if (
    offset !== undefined &&
    offset !== null &&
    !(Number.isSafeInteger(offset) && (offset as number) >= 0 && (offset as number) <= MAX_INT4)
  ) {
    problems.push(`inline_offset is not an integer from 0 to ${MAX_INT4}`);
  }
  const snippet = o.is_snippet;
  if (snippet !== undefined && snippet !== null && typeof snippet !== 'boolean') {
    problems.push('is_snippet is not a boolean');
  }
  let lastUpdated: string | null = null;
  const lu = str(o, 'last_updated_at', problems);
  if (lu !== null) {
    const t = parseOffsetTime(lu);
    if (t.ok) lastUpdated = t.utc;
    else problems.push(`last_updated_at: ${t.reason}`);
  }
  const value: CitationFields = {
    citation_id: str(o, 'id', problems),
    internal_id: str(o, 'internal_id', problems),
    citation_type: keyStr(o, 'citation_type', problems),
    name: keyStr(o, 'name', problems),
    inline_offset: typeof offset === 'number' ? offset : null,
    summary: str(o, 'summary', problems),
    last_updated_at: lastUpdated,
    is_snippet: typeof snippet === 'boolean' ? snippet : null,
    extra: null,
  };
  if (problems.length > 0) return { ok: false, reason: problems.join('; ') };
  // Object.fromEntries defines each key as an own property: `extra[k] = v` would make a key
  // "__proto__" the object's prototype, and the field would vanish from the stored JSON.
  const extra: Record<string, unknown> = Object.fromEntries(
    Object.entries(o).filter(([k]) => !(SPEC_FIELDS as readonly string[]).includes(k)),
  );
  value.extra = Object.keys(extra).length > 0 ? extra : null;
  return { ok: true, value };
}

/** Parses a citations array; the first bad citation makes the whole owner break the contract. */
export function parseCitations(
  v: unknown,
): { ok: true; value: CitationFields[] } | { ok: false; reason: string } {
  if (v === undefined || v === null) return { ok: true, value: [] };
  if (!Array.isArray(v)) return { ok: false, reason: 'citations is not an array' };
  const out: CitationFields[] = [];
  for (let i = 0; i < v.length; i++) {
    const r = parseCitation(v[i]);
    if (!r.ok) return { ok: false, reason: `citations[${i}] ${r.reason}` };
    out.push(r.value);
  }
  return { ok: true, value: out };
}
