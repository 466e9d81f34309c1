import {
  type DriftNote,
  type DriftSource,
  driftExample,
  type JsonType,
  jsonType,
} from '../common/schema-drift.ts';
import { storedKey } from '../common/stored-key.ts';

/**
 * The thread API's responses as the code knows them (docs/service-contract.md §2, and the fields
 * the simulator sends where the spec is silent, src/simulator/openapi.ts): each field with the
 * JSON types it may carry, the fields a response must have, and the fields of the objects of its
 * array fields (citations). A response is compared with it as it is parsed: a field not listed is
 * a new field, a listed one of another type a type change, a required one absent a missing field.
 */
interface Shape {
  fields: Readonly<Record<string, readonly JsonType[]>>;
  required: readonly string[];
  /** Array fields whose objects have a shape of their own (path `field[].key`). */
  items?: Readonly<Record<string, Shape>>;
}

const S: readonly JsonType[] = ['string', 'null'];
const N: readonly JsonType[] = ['number', 'null'];
const B: readonly JsonType[] = ['boolean', 'null'];
const A: readonly JsonType[] = ['array', 'null'];

const CITATION: Shape = {
  fields: {
    // spec §2
    id: S,
    internal_id: S,
    citation_type: S,
    name: S,
    inline_offset: N,
    summary: S,
    last_updated_at: S,
    is_snippet: B,
    // type-specific, kept in citations.extra
    url: S,
    snippet_start: N,
    snippet_end: N,
    file_id: S,
    file_name: S,
    article_count: N,
    published_at: S,
    document_id: S,
    page: N,
    data_point: N,
  },
  required: [],
};

const SHAPES: Readonly<Record<Exclude<DriftSource, 'export'>, Shape>> = {
  thread: {
    fields: {
      thread_id: ['string'],
      thread_name: S,
      user_id: S,
      created_at: S,
      updated_at: S,
      message_count: N,
    },
    required: ['thread_id'],
  },
  history: {
    fields: {
      message_id: ['string'],
      role: S,
      content: S,
      text: S,
      created_at: S,
      timestamp: S,
      citations: A,
      artifact_ids: A,
      status: S,
    },
    required: ['message_id', 'citations'],
    items: { citations: CITATION },
  },
  artifact: {
    fields: {
      output_type: S,
      title: S,
      val: S,
      citations: A,
      resolved_text_objects: B,
    },
    required: ['output_type', 'val'],
    items: { citations: CITATION },
  },
};

/**
 * The drift of one response object of `source`, appended to `out` (nothing is allocated when it
 * has none). Paths in `accepted` (`crs-sync schema accept`) are part of the contract.
 */
export function responseDrift(
  source: Exclude<DriftSource, 'export'>,
  value: unknown,
  out: DriftNote[],
  accepted?: ReadonlySet<string>,
): void {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
  shapeDrift(source, SHAPES[source], value as Record<string, unknown>, '', out, accepted);
}

function shapeDrift(
  source: DriftSource,
  shape: Shape,
  o: Record<string, unknown>,
  prefix: string,
  out: DriftNote[],
  accepted: ReadonlySet<string> | undefined,
): void {
  for (const k of shape.required) {
    const path = prefix + k;
    if (!Object.hasOwn(o, k) && !accepted?.has(path)) {
      out.push({
        source,
        path,
        kind: 'missing_field',
        expected: (shape.fields[k] ?? []).join('|'),
        actual: null,
        example: null,
      });
    }
  }
  // Own keys only, and looked up as own keys of the shape: a key the service sends is data, and
  // `constructor`, `toString` or `__proto__` would otherwise find Object.prototype's members.
  for (const k of Object.keys(o)) {
    const v = o[k];
    // Bounded in bytes: a path is a key of schema_drift, and of the accepted set (as stored).
    const path = storedKey(prefix + k);
    const types = own(shape.fields, k);
    if (!accepted?.has(path)) {
      const t = jsonType(v);
      if (types === undefined) {
        out.push({
          source,
          path,
          kind: 'new_field',
          expected: null,
          actual: t,
          example: driftExample(path, v),
        });
      } else if (!types.includes(t)) {
        out.push({
          source,
          path,
          kind: 'type_changed',
          expected: types.join('|'),
          actual: t,
          example: driftExample(path, v),
        });
      }
    }
    const item = own(shape.items, k);
    if (item !== undefined && Array.isArray(v)) {
      // One note per path and kind is enough: the entity is counted once either way.
      const before = out.length;
      for (const c of v) {
        if (c !== null && typeof c === 'object' && !Array.isArray(c)) {
          shapeDrift(source, item, c as Record<string, unknown>, `${path}[].`, out, accepted);
        }
      }
      dedupeFrom(out, before);
    }
  }
}

/** `rec[k]` when `rec` has `k` as an own key (never an inherited member), else undefined. */
function own<T>(rec: Readonly<Record<string, T>> | undefined, k: string): T | undefined {
  return rec !== undefined && Object.hasOwn(rec, k) ? rec[k] : undefined;
}

function dedupeFrom(out: DriftNote[], from: number): void {
  if (out.length - from < 2) return;
  const seen = new Set<string>();
  let w = from;
  for (let r = from; r < out.length; r++) {
    const n = out[r] as DriftNote;
    const k = `${n.path}\u0000${n.kind}`;
    if (seen.has(k)) continue;
    seen.add(k);
    out[w++] = n;
  }
  out.length = w;
}

/**
 * What a frozen contract (CRS_RECORD_CONTRACT=freeze) refused in a response, e.g. `new field
 * "sentiment" (string)`: the detail of its `schema_drift` quarantine row.
 */
export function driftDetail(what: string, notes: readonly DriftNote[]): string {
  const parts = notes.map((d) =>
    d.kind === 'new_field'
      ? `new field ${JSON.stringify(d.path)} (${d.actual})`
      : d.kind === 'missing_field'
        ? `missing field ${JSON.stringify(d.path)} (${d.expected})`
        : `${JSON.stringify(d.path)}: expected ${d.expected}, got ${d.actual}`,
  );
  const d = `the ${what} differs from the contract (CRS_RECORD_CONTRACT=freeze): ${parts.join('; ')}`;
  // As an export line's detail: many new fields must not make a long row.
  return d.length > MAX_DETAIL ? `${d.slice(0, MAX_DETAIL - 1).toWellFormed()}…` : d;
}

const MAX_DETAIL = 300;
