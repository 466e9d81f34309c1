import { hash } from 'node:crypto';

/**
 * The change-detection hash of an export record: md5 (speed, not security) over the JSON text of
 * [messageId, threadId, userId, messageTime, input, response, extra], all as normalised by the
 * parser (lower-case ids, messageTime in UTC) and with the keys of `extra` sorted at every depth.
 * So a record re-serialised with other key order, whitespace, escapes or offset notation hashes
 * the same, while any change to a value that is stored changes the hash.
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
  const canonical = JSON.stringify([
    messageId,
    threadId,
    userId,
    messageTime,
    input,
    response,
    extra === null ? null : sortKeys(extra),
  ]);
  return hash('md5', canonical, 'hex');
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
