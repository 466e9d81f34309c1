import { describe, expect, it } from 'vitest';
import { notStorable, storableText } from '../../src/enrich/storable.ts';

describe('notStorable', () => {
  it('when a value holds U+0000 or a lone surrogate in a value or a key, then it names which', () => {
    expect(notStorable({ a: 'x\u0000y' })?.code).toBe('nul_character');
    expect(notStorable({ a: ['x', { b: 'y\ud800' }] })?.code).toBe('lone_surrogate');
    expect(notStorable({ 'k\udfff': 1 })?.code).toBe('lone_surrogate');
    expect(notStorable('\udc00 at the start')?.code).toBe('lone_surrogate');
  });

  it('when a surrogate pair or escape-like plain text is present, then the value is storable', () => {
    expect(notStorable({ a: 'a pair \ud83d\ude00' })).toBeUndefined();
    // A literal backslash followed by the text "ud800" or "u0000" is ordinary text.
    expect(notStorable({ a: 'x\\ud800', b: 'y\\u0000', c: '\\\\ud800' })).toBeUndefined();
    expect(notStorable({ n: 1, b: true, z: null, e: [] })).toBeUndefined();
  });

  it('when a backslash is followed by a lone surrogate, then the surrogate is still found', () => {
    expect(notStorable({ a: '\\\ud800' })?.code).toBe('lone_surrogate');
    expect(notStorable({ a: '\\\u0000' })?.code).toBe('nul_character');
  });
});

describe('storableText', () => {
  it('when a text holds U+0000 or lone surrogates, then each becomes U+FFFD and pairs stay', () => {
    expect(storableText('a\u0000b\ud800c\udfff \ud83d\ude00')).toBe('a\ufffdb\ufffdc\ufffd \ud83d\ude00');
    expect(storableText('plain')).toBe('plain');
  });
});
