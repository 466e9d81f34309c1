import { hash } from 'node:crypto';

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
 * instead of converting each text to UTF-8 a second time.
 *
 * The canonical form is assembled in one reused buffer and hashed with one call: a Hash object
 * fed in five pieces cost twice the sha1 itself per record (five crossings into C++, an object),
 * and copying 1-2 KB of bytes is cheap next to that.
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
  const head = `${messageId}\n${threadId}\n${userId}\n${messageTime}\n${inputUnits}:`;
  const mid = `\n${responseUnits}:`;
  const tail = extra === null ? '\nnull' : `\n${JSON.stringify(sortKeys(extra))}`;
  // At most 3 UTF-8 bytes per UTF-16 unit.
  const b = room(
    3 * (head.length + mid.length + tail.length) +
      (typeof input === 'string' ? 3 * input.length : input.length) +
      (typeof response === 'string' ? 3 * response.length : response.length),
  );
  let n = b.write(head, 0, 'utf8');
  n += put(b, n, input);
  n += b.write(mid, n, 'utf8');
  n += put(b, n, response);
  n += b.write(tail, n, 'utf8');
  return hash('sha1', b.subarray(0, n), 'hex');
}

// The canonical form of the record being hashed; grown for a larger record, never shrunk (it is
// at most a few times the longest line the loader accepts).
let scratch = Buffer.allocUnsafe(1 << 16);

function room(bytes: number): Buffer {
  if (scratch.length < bytes) {
    let size = scratch.length * 2;
    while (size < bytes) size *= 2;
    scratch = Buffer.allocUnsafe(size);
  }
  return scratch;
}

function put(b: Buffer, at: number, v: string | Uint8Array): number {
  if (typeof v === 'string') return b.write(v, at, 'utf8');
  b.set(v, at);
  return v.length;
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
