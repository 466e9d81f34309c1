import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

/**
 * Pseudonymous user ids (CRS_USER_ID_POLICY=pseudonymize, docs/privacy.md): a user id is stored as
 * HMAC-SHA256 under CRS_PSEUDONYM_KEY of its canonical (lower-case) form, its first 16 bytes
 * written as a UUID (version 8, "custom", RFC 9562), so it fits the `uuid` columns, joins and
 * counts as the plain id did, and is the same in every table and every load. Without the key
 * nobody can tell which person a pseudonym is, or test a guess.
 */
export function pseudonymOf(key: string | KeyObject, userId: string): string {
  const h = createHmac('sha256', key).update(`user:${userId.toLowerCase()}`).digest();
  h[6] = ((h[6] ?? 0) & 0x0f) | 0x80;
  h[8] = ((h[8] ?? 0) & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/** What tells two keys apart without showing either: recorded with the warehouse's policy. */
export function keyFingerprint(key: string): string {
  return createHmac('sha256', key).update('crs-sync pseudonym key').digest('hex').slice(0, 16);
}

/**
 * The user id as stored under a policy: the id itself, or its pseudonym (memoised: a day's lines
 * repeat each user's id many times; bounded, as a worker lives long).
 */
export function storedUserIds(
  policy: { policy: 'keep' } | { policy: 'pseudonymize'; key: string },
): ((userId: string) => string) | undefined {
  if (policy.policy === 'keep') return undefined;
  // Made once: an HMAC under a string key makes a KeyObject per call (~5x the cost).
  const key = createSecretKey(Buffer.from(policy.key, 'utf8'));
  const memo = new Map<string, string>();
  return (userId) => {
    let p = memo.get(userId);
    if (p === undefined) {
      p = pseudonymOf(key, userId);
      if (memo.size >= 100_000) memo.clear();
      memo.set(userId, p);
    }
    return p;
  };
}
