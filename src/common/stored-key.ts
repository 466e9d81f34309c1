import { hash } from 'node:crypto';

/**
 * The bound on text from the data that the warehouse keeps in a btree key (a drift's path and
 * scope, a citation's name and type; an artifact id, which cannot be cut, is refused over it by
 * the entry naming it): UTF-8 bytes. A btree index row holds at most 2704
 * bytes (PostgreSQL's `btree version 4 maximum`); one over it fails its whole statement, and
 * with it the batch, the page, the load, on every retry. 512 bytes leaves room for the other
 * columns of the key (a drift count's scope and load key) and is far beyond any real field name.
 */
export const STORED_KEY_BYTES = 512;

/** Hex digits of the sha256 of the full text kept in a bounded key: 64 bits. */
const HASH_HEX = 16;
/** `…` (U+2026, 3 bytes of UTF-8) and `#` before the hash. */
const MARKER = '…#';
const MARKER_BYTES = 4 + HASH_HEX;
/**
 * Text of at most this many UTF-16 units is within the bound unmeasured (a unit is at most 3
 * bytes of UTF-8): only longer text needs `storedKey` to be measured, the common case a compare.
 */
export const STORED_KEY_UNITS_WITHIN: number = Math.floor(STORED_KEY_BYTES / 3);

/**
 * `text` as the warehouse stores it where it is a key: itself when it is at most
 * STORED_KEY_BYTES of UTF-8 and PostgreSQL text can hold it; otherwise a prefix cut on a
 * character boundary, `…#` and the first 16 hex digits of the sha256 of the whole text, in at
 * most STORED_KEY_BYTES bytes, so that two long texts sharing their prefix stay two keys. Text
 * PostgreSQL cannot store (U+0000, a lone surrogate) gets the hashed form too, its prefix made
 * storable. Deterministic: the same text always gives the same key, so a key stored by one
 * process is found by another (an accepted drift path, a re-read citation).
 */
export function storedKey(text: string): string {
  if (text.length <= STORED_KEY_UNITS_WITHIN) {
    if (!text.includes('\u0000') && text.isWellFormed()) return text;
  } else if (Buffer.byteLength(text) <= STORED_KEY_BYTES && !text.includes('\u0000') && text.isWellFormed()) {
    return text;
  }
  return boundedForm(text);
}

function boundedForm(text: string): string {
  const budget = STORED_KEY_BYTES - MARKER_BYTES;
  // Every unit is at least one byte, so `budget` units are enough for `budget` bytes.
  const head = text.slice(0, budget).replaceAll('\u0000', '\\0');
  const bytes = Buffer.from(head, 'utf8');
  let end = Math.min(budget, bytes.length);
  // Back to the start of a character: never end inside a UTF-8 sequence (a surrogate pair the
  // slice split, its half now U+FFFD, goes with it).
  while (end > 0 && end < bytes.length && ((bytes[end] as number) & 0xc0) === 0x80) end--;
  // A lone surrogate is U+FFFD in the bytes: the prefix is well-formed.
  return `${bytes.toString('utf8', 0, end)}${MARKER}${hash('sha256', text, 'hex').slice(0, HASH_HEX)}`;
}
