import { describe, expect, it } from 'vitest';
import { ByteSink, putMessageTuple } from '../../src/ingest/merge/copy-binary.ts';
import { parseRecord } from '../../src/ingest/parse/record-parser.ts';

// The loader hashes a record from the UTF-8 bytes it has just encoded for COPY; the value must be
// the one parseRecord computes from the strings, or every re-load would see changed records.

function line(input: string, response: string, more = ''): string {
  return `{"Message ID":"0f8fad5b-d9cb-469f-a165-70867728950e","Thread ID":"7c9e6679-7425-40de-944b-e07fc1f90ae7","User ID":"a8098c1a-f86e-11da-bd1a-00112444be1e","Message Time":"2026-11-20T01:00:00.250+05:30","Input":${JSON.stringify(input)},"Response":${JSON.stringify(response)}${more}}`;
}

describe('record hash from the encoded bytes', () => {
  it.each([
    ['ascii', line('what is x?', 'x is y')],
    ['empty texts', line('', '')],
    ['2-, 3- and 4-byte characters', line('é ß 中文', '😀 👩‍👩‍👧‍👦 𝄞 €')],
    ['escapes and control characters', line('a\n\t"b"\\', '\u0001\u007f\r\n')],
    [
      'extra keys in any order, nested',
      line('q', 'a', ',"z":{"b":[1,2,{"y":null}],"a":"é"},"big":12345678901234567891'),
    ],
    ['long texts', line('中'.repeat(3000), '😀'.repeat(3000))],
  ])(
    'when a record has %s, then the hash from its encoded bytes equals the hash from its strings',
    (_name, text) => {
      const reference = parseRecord(text);
      const lazy = parseRecord(text, { hash: false });
      if (!reference.ok || !lazy.ok) throw new Error('fixture does not parse');
      expect(lazy.record.recordHash).toBe('');
      // A small sink, so that it grows while the texts are written.
      const sink = new ByteSink(64);
      putMessageTuple(sink, lazy.record, 7, 'load', 'f'.repeat(40));
      expect(lazy.record.recordHash).toBe(reference.record.recordHash);
      expect(lazy.record.recordHash).toMatch(/^[0-9a-f]{40}$/);
    },
  );

  it('when a record already has its hash, then encoding it leaves the hash as it is', () => {
    const r = parseRecord(line('q', 'a'));
    if (!r.ok) throw new Error('fixture does not parse');
    const before = r.record.recordHash;
    putMessageTuple(new ByteSink(), r.record, 1, 'load', 'f'.repeat(40));
    expect(r.record.recordHash).toBe(before);
  });
});
