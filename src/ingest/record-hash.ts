import { createHash } from 'node:crypto';

/**
 * The change-detection hash of an export record: sha1 hex (speed, not security: with SHA
 * extensions it beats md5 here) over the values as normalised by the parser (lower-case ids,
 * messageTime in UTC), each string prefixed with its length so that no two records share a
 * canonical form, then `extra` as JSON with its keys sorted at every depth (or `null`):
 *
 *   messageId \n threadId \n userId \n messageTime \n <len>:input \n <len>:response \n extraJson
 *
 * So a record re-serialised with other key order, whitespace, escapes or offset notation hashes
 * the same, while any change to a value that is stored changes the hash. Texts are not passed
 * through JSON.stringify: that re-escaping cost more than the hash itself.
 */
export function recordHash(
  messageId: string,
  threadId: string,
  userId: string,
  messageTime: string,
  input: string,
  response: string,
  extra: Record<string, unknown> | null,
): string {
  return recordHashOf(
    messageId,
    threadId,
    userId,
    messageTime,
    input.length,
    input,
    response.length,
    response,
    extra,
  );
}

/**
 * The same hash, with the texts given as their UTF-8 bytes (and their lengths in UTF-16 units, as
 * the canonical form counts them): the loader hashes the bytes it has just encoded for COPY
 * instead of converting each text to UTF-8 a second time inside the hash.
 */
export function recordHashOf(
  messageId: string,
  threadId: string,
  userId: string,
  messageTime: string,
  inputUnits: number,
  input: string | Uint8Array,
  responseUnits: number,
  response: string | Uint8Array,
  extra: Record<string, unknown> | null,
): string {
  const extraJson = extra === null ? 'null' : JSON.stringify(sortKeys(extra));
  // Fed in pieces rather than as one concatenated string: the same bytes (every piece is
  // well-formed UTF-16, so no character is split), without a 1.6 KB string of garbage per record.
  return createHash('sha1')
    .update(`${messageId}\n${threadId}\n${userId}\n${messageTime}\n${inputUnits}:`)
    .update(input)
    .update(`\n${responseUnits}:`)
    .update(response)
    .update(`\n${extraJson}`)
    .digest('hex');
}

// JSON.rawJSON / isRawJSON exist in Node 24 (V8) but not yet in the es2024 lib typings.
const rawJson = JSON as unknown as { isRawJSON(v: unknown): boolean };

function sortKeys(v: unknown): unknown {
  if (typeof v !== 'object' || v === null || rawJson.isRawJSON(v)) return v;
  if (Array.isArray(v)) return v.map(sortKeys);
  const src = v as Record<string, unknown>;
  // A null prototype, so that a key named "__proto__" stays an ordinary key.
  const out: Record<string, unknown> = Object.create(null);
  for (const k of Object.keys(src).sort()) out[k] = sortKeys(src[k]);
  return out;
}
