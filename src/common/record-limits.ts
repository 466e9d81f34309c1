/**
 * Limits on the shape of a record's unknown keys (`extra`), so that every record the parser
 * accepts can be hashed, encoded and stored: JSON.stringify and any recursive walk throw
 * RangeError a few thousand levels down, and PostgreSQL refuses a jsonb number beyond its numeric
 * range (SQLSTATE 22003) and fails the whole COPY. The key limits keep `extra` a set of fields,
 * not a payload: no export field name comes near them. Key length is in bytes of UTF-8, what
 * PostgreSQL stores (a key of 1,024 CJK characters is 3,072 bytes).
 *
 * The export's parser (src/ingest/parse/record-parser.ts) checks an export line against them, and
 * enrichment (src/enrich/storable.ts) a history entry or an artifact: one set of limits for both.
 */
export const RECORD_LIMITS = {
  /** Levels of nesting, the line's own object being level 1. */
  maxDepth: 64,
  /** Bytes of UTF-8 of one key of `extra`, at any depth. */
  maxKeyBytes: 1024,
  /** Keys of `extra`, counted over every depth. */
  maxKeys: 10_000,
} as const;
