import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseRecord, rejectCodeForLineProblem } from '../../src/ingest/parse/record-parser.ts';

const fixtures = new URL('../fixtures/bad-lines/', import.meta.url);
const lines = readFileSync(new URL('records.jsonl', fixtures), 'utf8').split('\n');
const expected = readFileSync(new URL('records.expected.tsv', fixtures), 'utf8')
  .split('\n')
  .filter((l) => l !== '' && !l.startsWith('#'))
  .map((l) => {
    const [no, code, fragment] = l.split('\t');
    return { lineNo: Number(no), code: code!, fragment: fragment ?? '' };
  });

const base = {
  Input: 'What is the churn rate?',
  Response: 'It is 4.2%.',
  'Message ID': '3f1c2a9e-8b7d-4c6e-9a1b-2d3e4f5a6b7c',
  'Message Time': '2026-11-20T09:15:30.250Z',
  'Thread ID': '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
  'User ID': '0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6',
};

function okRecord(text: string) {
  const r = parseRecord(text);
  if (!r.ok) throw new Error(`expected ok, got ${r.code}: ${r.detail}`);
  return r.record;
}

describe('parseRecord on the bad-lines corpus', () => {
  it('when the corpus is read, then every line has an expectation', () => {
    expect(lines.at(-1)).toBe('');
    expect(expected.map((e) => e.lineNo)).toEqual(lines.slice(0, -1).map((_, i) => i + 1));
  });

  for (const e of expected) {
    const text = lines[e.lineNo - 1]!;
    if (e.code === 'ok') {
      const [time, date] = e.fragment.split(' ');
      it(`when line ${e.lineNo} is valid, then it parses to ${time} on ${date}`, () => {
        const rec = okRecord(text);
        expect(rec.messageTime).toBe(time);
        expect(rec.messageDate).toBe(date);
      });
    } else {
      it(`when line ${e.lineNo} is read, then it is rejected as ${e.code} naming ${e.fragment || 'the cause'}`, () => {
        const r = parseRecord(text);
        expect(r).toMatchObject({ ok: false, code: e.code });
        if (!r.ok) {
          expect(r.detail).toContain(e.fragment);
          expect(r.detail.length).toBeLessThanOrEqual(300);
        }
      });
    }
  }
});

describe('parseRecord on valid records', () => {
  it('when ids are upper case, then they are stored lower case', () => {
    const rec = okRecord(
      JSON.stringify({
        ...base,
        'Message ID': '3F1C2A9E-8B7D-4C6E-9A1B-2D3E4F5A6B7C',
        'Thread ID': '9A8B7C6D-5e4f-4A3B-8C2D-1E0F9A8B7C6D',
        'User ID': '0D1E2F3A-4B5C-4D6E-8F70-8192A3B4C5D6',
      }),
    );
    expect(rec.messageId).toBe('3f1c2a9e-8b7d-4c6e-9a1b-2d3e4f5a6b7c');
    expect(rec.threadId).toBe('9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d');
    expect(rec.userId).toBe('0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6');
  });

  it('when a record has only the six named keys, then extra is null and texts are kept exactly', () => {
    const rec = okRecord(JSON.stringify({ ...base, Input: '  spaced \u00e9 😀 ', Response: '' }));
    expect(rec.extra).toBeNull();
    expect(rec.input).toBe('  spaced \u00e9 😀 ');
    expect(rec.response).toBe('');
  });

  it('when a record has unknown keys, then they are kept verbatim in extra, in source order', () => {
    const rec = okRecord(
      JSON.stringify({
        zeta: [1, { b: null }],
        ...base,
        alpha: { nested: 'x' },
        'Feedback Score': 4.5,
        flag: false,
      }),
    );
    expect(JSON.stringify(rec.extra)).toBe(
      '{"zeta":[1,{"b":null}],"alpha":{"nested":"x"},"Feedback Score":4.5,"flag":false}',
    );
  });

  it('when an extra key is named "__proto__", then it stays an ordinary key', () => {
    const rec = okRecord(`{"__proto__": {"polluted": true}, ${JSON.stringify(base).slice(1)}`);
    expect(JSON.stringify(rec.extra)).toBe('{"__proto__":{"polluted":true}}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('when an extra number exceeds double precision, then its source digits are kept', () => {
    const text = `${JSON.stringify(base).slice(0, -1)}, "big": 12345678901234567891, "pi": 3.14159265358979323846, "n": 7}`;
    const rec = okRecord(text);
    expect(JSON.stringify(rec.extra)).toBe('{"big":12345678901234567891,"pi":3.14159265358979323846,"n":7}');
  });

  it('when a key appears twice, then the last occurrence wins', () => {
    const text = `{"Input": "first", ${JSON.stringify(base).slice(1, -1)}, "Input": "last", "x": 1, "x": 2}`;
    const rec = okRecord(text);
    expect(rec.input).toBe('last');
    expect(rec.extra).toEqual({ x: 2 });
  });

  it('when a string holds an escaped surrogate pair, then it is accepted as the one character', () => {
    const rec = okRecord(JSON.stringify(base).replace('"It is 4.2%."', '"\\ud83d\\ude00"'));
    expect(rec.response).toBe('😀');
  });

  it('when the raw text itself holds a lone surrogate, then it is not storable', () => {
    const r = parseRecord(JSON.stringify({ ...base, Input: 'bad \ud800' }));
    expect(r).toMatchObject({ ok: false, code: 'text_not_storable' });
  });
});

describe('the UTC-date rule', () => {
  const cases: [string, string, string][] = [
    ['2026-11-20T01:00:00+05:30', '2026-11-19T19:30:00Z', '2026-11-19'],
    ['2026-11-20T05:29:59.999+05:30', '2026-11-19T23:59:59.999Z', '2026-11-19'],
    ['2026-11-20T05:30:00+05:30', '2026-11-20T00:00:00Z', '2026-11-20'],
    ['2026-11-20T00:00:00+14:00', '2026-11-19T10:00:00Z', '2026-11-19'],
    ['2026-11-20T23:59:59+14:00', '2026-11-20T09:59:59Z', '2026-11-20'],
    ['2026-11-20T11:59:59.123456-12:00', '2026-11-20T23:59:59.123456Z', '2026-11-20'],
    ['2026-11-20T12:00:00.000001-12:00', '2026-11-21T00:00:00.000001Z', '2026-11-21'],
    ['2026-11-20T23:59:59.9999999Z', '2026-11-20T23:59:59.999999Z', '2026-11-20'],
    ['2026-11-20T10:00:00.10Z', '2026-11-20T10:00:00.1Z', '2026-11-20'],
    ['2027-01-01T05:00:00+14:00', '2026-12-31T15:00:00Z', '2026-12-31'],
    ['2024-02-29T20:00:00-12:00', '2024-03-01T08:00:00Z', '2024-03-01'],
    ['9999-12-31T23:59:59Z', '9999-12-31T23:59:59Z', '9999-12-31'],
  ];
  for (const [given, utc, date] of cases) {
    it(`when Message Time is ${given}, then the time is ${utc} and the UTC date ${date}`, () => {
      const rec = okRecord(JSON.stringify({ ...base, 'Message Time': given }));
      expect(rec.messageTime).toBe(utc);
      expect(rec.messageDate).toBe(date);
      // The normalised form must agree with the JavaScript clock, to the millisecond.
      expect(new Date(utc).getTime()).toBe(new Date(given.replace(/(\.\d{3})\d+/, '$1')).getTime());
    });
  }
});

describe('reject details', () => {
  it('when the rejected text holds NUL or a lone surrogate, then the detail itself is storable text', () => {
    for (const text of ['{"a": \u0000}', '{"a": x\ud800}', `{"Input": ${'\u0000'.repeat(400)}`]) {
      const r = parseRecord(text);
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.code).toBe('invalid_json');
        expect(r.detail.includes('\u0000')).toBe(false);
        expect(r.detail.isWellFormed()).toBe(true);
        expect(r.detail.length).toBeLessThanOrEqual(300);
      }
    }
  });

  it('when a value in the detail is long, then it is trimmed', () => {
    const r = parseRecord(JSON.stringify({ ...base, 'User ID': 'u'.repeat(5000) }));
    expect(r).toMatchObject({ ok: false, code: 'invalid_uuid' });
    if (!r.ok) expect(r.detail).toBe(`"User ID": not a UUID: "${'u'.repeat(80)}"…`);
  });
});

describe('recordHash', () => {
  it('when a record is re-serialised with other key order, spacing, escapes and offset notation, then the hash is equal', () => {
    const a = okRecord(JSON.stringify({ ...base, meta: { b: 1, a: [2, { y: 1, x: 2 }] } }));
    const b = okRecord(
      `{ "meta" : { "a" : [2, {"x": 2, "y": 1}], "b": 1 }, "User ID": "0D1E2F3A-4B5C-4D6E-8F70-8192A3B4C5D6",
        "Thread ID": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", "Message Time": "2026-11-20T10:15:30.25+01:00",
        "Message ID": "3f1c2a9e-8b7d-4c6e-9a1b-2d3e4f5a6b7c", "Response": "It is 4.2\\u0025.", "Input": "What is the churn rate?" }`.replace(
        /\n/g,
        ' ',
      ),
    );
    expect(b.recordHash).toBe(a.recordHash);
    expect(a.recordHash).toMatch(/^[0-9a-f]{40}$/);
  });

  it('when any stored value changes, then the hash changes', () => {
    const h = okRecord(JSON.stringify(base)).recordHash;
    const variants = [
      { ...base, Input: 'What is the churn rate? ' },
      { ...base, Response: 'It is 4.3%.' },
      { ...base, 'Message Time': '2026-11-20T09:15:30.251Z' },
      { ...base, 'User ID': '0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d7' },
      { ...base, extra: null },
      { ...base, extra: '' },
    ];
    const hashes = variants.map((v) => okRecord(JSON.stringify(v)).recordHash);
    expect(new Set([h, ...hashes]).size).toBe(variants.length + 1);
  });

  it('when text moves between Input and Response, then the hash changes', () => {
    const a = okRecord(JSON.stringify({ ...base, Input: 'ab', Response: '' })).recordHash;
    const b = okRecord(JSON.stringify({ ...base, Input: 'a', Response: 'b' })).recordHash;
    expect(a).not.toBe(b);
  });
});

describe('rejectCodeForLineProblem', () => {
  it('when the splitter reports a problem, then it maps to a reject code', () => {
    expect(rejectCodeForLineProblem('line_too_long')).toBe('line_too_long');
    expect(rejectCodeForLineProblem('invalid_utf8')).toBe('invalid_utf8');
    expect(rejectCodeForLineProblem('nul_byte')).toBe('text_not_storable');
  });
});
