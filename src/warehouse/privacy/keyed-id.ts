import { createHmac, type KeyObject, randomBytes } from 'node:crypto';
import { type Queryable, rowsOf } from '../read/queryable.ts';

/**
 * The suppression list's hashes: HMAC-SHA256 under the deployment's key (`privacy_key`), of the
 * kind and the id in its canonical (lower-case) UUID form, so `forget --user` with an id in
 * upper case suppresses what the service sends in lower case. A keyed hash, not a plain one:
 * without the key, nobody can test a list of candidate ids against the list.
 */
export type ErasedKind = 'user' | 'thread';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The id as the warehouse stores it (a `uuid` column prints lower case), or undefined if it is not a UUID. */
export function canonicalId(id: string): string | undefined {
  const s = id.trim().toLowerCase();
  return UUID.test(s) ? s : undefined;
}

const UUID_IN_TEXT = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const ESCAPE = /\\u([0-9a-fA-F]{4})/g;

/**
 * Every UUID a line's text names (lower case), read as JSON.parse would too: a quarantined line
 * may spell an id with `\uXXXX` escapes (`"\u0061bc…"` is `"abc…"` to JSON.parse, and to the
 * service), so the text is searched again with them decoded. A literal backslash before a `u`
 * is decoded as well: it may name one id more, which only erases or drops a quarantined line more.
 */
export function uuidsIn(text: string): string[] {
  const out = Array.from(text.matchAll(UUID_IN_TEXT), (m) => m[0].toLowerCase());
  if (text.includes('\\u')) {
    const decoded = text.replace(ESCAPE, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
    for (const m of decoded.matchAll(UUID_IN_TEXT)) out.push(m[0].toLowerCase());
  }
  return out;
}

export function keyedId(key: Buffer | KeyObject, kind: ErasedKind, canonical: string): Buffer {
  return createHmac('sha256', key).update(`${kind}:${canonical}`).digest();
}

/**
 * The deployment's key; made (32 random bytes) when `create` and none exists yet. Two first
 * erasures at once both insert; the one that loses the primary key reads the winner's.
 */
export async function privacyKey(q: Queryable, create: boolean): Promise<Buffer | undefined> {
  const read = async (): Promise<Buffer | undefined> =>
    (await rowsOf<{ key: Buffer }>(q, 'select key from privacy_key'))[0]?.key;
  const key = await read();
  if (key || !create) return key;
  await q.query('insert into privacy_key (key) values ($1) on conflict do nothing', [randomBytes(32)]);
  return read();
}
