import { describe, expect, it } from 'vitest';
import { STORED_KEY_BYTES, storedKey } from '../../src/common/stored-key.ts';

const bytes = (s: string) => Buffer.byteLength(s);
const HASHED = /…#[0-9a-f]{16}$/;

describe('storedKey: data-derived text bounded in bytes where it is a btree key', () => {
  it('when text is at most 512 bytes of UTF-8, then it is stored as it is', () => {
    for (const s of [
      '',
      'Region',
      'k'.repeat(512),
      '漢'.repeat(170),
      '漢'.repeat(170) + 'ab',
      '😀'.repeat(128),
    ]) {
      expect(bytes(s)).toBeLessThanOrEqual(STORED_KEY_BYTES);
      expect(storedKey(s)).toBe(s);
    }
  });

  it('when text is over 512 bytes (ASCII, CJK, emoji, 1 MB), then the key is a prefix of it cut on a character boundary, a marker and a hash, within 512 bytes', () => {
    for (const s of [
      'k'.repeat(513),
      '漢'.repeat(171),
      '漢'.repeat(1024),
      'a' + '😀'.repeat(200),
      '😀'.repeat(129),
      'x'.repeat(1 << 20),
    ]) {
      const key = storedKey(s);
      expect(bytes(key)).toBeLessThanOrEqual(STORED_KEY_BYTES);
      expect(key).toMatch(HASHED);
      const prefix = key.replace(HASHED, '');
      expect(s.startsWith(prefix)).toBe(true);
      expect(prefix.isWellFormed()).toBe(true);
      // Cut as late as a character allows: less than one 4-byte character short of the room.
      expect(bytes(prefix)).toBeGreaterThan(STORED_KEY_BYTES - 20 - 4);
      // Stable, and a key is its own key (a stored path looked up again is found).
      expect(storedKey(s)).toBe(key);
      expect(storedKey(key)).toBe(key);
    }
  });

  it('when two long texts share their first 600 bytes, then their keys differ', () => {
    const head = 'field '.repeat(100);
    const a = storedKey(`${head}alpha`);
    const b = storedKey(`${head}beta`);
    expect(a).not.toBe(b);
    expect(a.replace(HASHED, '')).toBe(b.replace(HASHED, ''));
  });

  it('when text holds U+0000 or a lone surrogate (PostgreSQL text cannot), then its key is storable text and differs from the key of similar text', () => {
    for (const s of ['a\u0000b', 'x\ud800y', `${'k'.repeat(600)}\u0000`]) {
      const key = storedKey(s);
      expect(key).toMatch(HASHED);
      expect(key.includes('\u0000')).toBe(false);
      expect(key.isWellFormed()).toBe(true);
      expect(bytes(key)).toBeLessThanOrEqual(STORED_KEY_BYTES);
    }
    expect(storedKey('a\u0000b')).not.toBe(storedKey('a\u0000c'));
  });
});
