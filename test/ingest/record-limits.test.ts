import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { dayOfTimeText } from '../../src/common/iso-time.ts';
import { STORED_KEY_BYTES, storedKey } from '../../src/common/stored-key.ts';
import { recordHash } from '../../src/ingest/parse/record-hash.ts';
import {
  exportContract,
  lastDrift,
  numericInRange,
  parseRecord,
  RECORD_LIMITS,
} from '../../src/ingest/parse/record-parser.ts';

const base = {
  Input: 'q',
  Response: 'a',
  'Message ID': '3f1c2a9e-8b7d-4c6e-9a1b-2d3e4f5a6b7c',
  'Message Time': '2026-11-20T09:15:30.250Z',
  'Thread ID': '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
  'User ID': '0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6',
};
/** A valid line with `tail` (source text of more keys) added. */
const withExtra = (tail: string): string => `${JSON.stringify(base).slice(0, -1)},${tail}}`;
const nested = (levels: number, open = '[', close = ']'): string =>
  open.repeat(levels) + close.repeat(levels);

describe('record limits', () => {
  it('when a ~20 KB line is nested 10,000 levels deep (arrays or objects), then it is rejected as nesting_too_deep, without a RangeError', () => {
    for (const line of [
      withExtra(`"x":${nested(10_000)}`),
      withExtra(`"x":${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`),
      withExtra(`"x":[1.5, ${nested(10_000)}]`),
    ]) {
      const r = parseRecord(line);
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.code).toBe('nesting_too_deep');
        expect(r.detail).toContain('"x"');
      }
    }
  });

  it('when extra is nested exactly to the limit, then the record is accepted and hashes; one level more is rejected', () => {
    // The line's object is level 1, so a value of `extra` may hold maxDepth - 1 levels.
    const ok = parseRecord(withExtra(`"x":${nested(RECORD_LIMITS.maxDepth - 1)}`));
    expect(ok.ok).toBe(true);
    if (ok.ok) expect(ok.record.recordHash).toMatch(/^[0-9a-f]{40}$/);
    const tooDeep = parseRecord(withExtra(`"x":${nested(RECORD_LIMITS.maxDepth)}`));
    expect(tooDeep).toMatchObject({ ok: false, code: 'nesting_too_deep' });
  });

  it('when a number of extra is beyond PostgreSQL numeric (1e200000, 1e-20000, a 140,000-digit integer), then it is rejected as number_out_of_range', () => {
    for (const n of [
      '1e200000',
      '-1e200000',
      '1e-20000',
      '0e-16384',
      `1${'0'.repeat(140_000)}`,
      '1e99999999999',
    ]) {
      const r = parseRecord(withExtra(`"u":{"deep":[${n}]}`));
      expect(r, n.slice(0, 20)).toMatchObject({ ok: false, code: 'number_out_of_range' });
    }
  });

  it('when numbers are huge or tiny but within numeric (1e400, 1e-400, -0, 2^70), then the record is accepted with their source digits', () => {
    const r = parseRecord(withExtra('"n":[1e400,1e-400,-0,1180591620717411303424,1e131071,1e-16383]'));
    expect(r.ok).toBe(true);
    if (r.ok) {
      expect(JSON.stringify(r.record.extra)).toBe(
        '{"n":[1e400,1e-400,-0,1180591620717411303424,1e131071,1e-16383]}',
      );
      const h = r.record;
      expect(h.recordHash).toBe(
        recordHash(h.messageId, h.threadId, h.userId, h.messageTime, h.input, h.response, h.extra),
      );
    }
  });

  it('when a key of extra is longer than maxKeyBytes of UTF-8 (at the top or nested), then it is rejected as key_too_long, and the detail says bytes', () => {
    const long = 'k'.repeat(RECORD_LIMITS.maxKeyBytes + 1);
    expect(parseRecord(withExtra(`"${long}":1`))).toMatchObject({
      ok: false,
      code: 'key_too_long',
      detail: expect.stringContaining(`is ${RECORD_LIMITS.maxKeyBytes + 1} bytes of UTF-8, more than 1024`),
    });
    expect(parseRecord(withExtra(`"a":{"b":{"${long}":1}}`))).toMatchObject({
      ok: false,
      code: 'key_too_long',
    });
    expect(parseRecord(withExtra(`"${long.slice(1)}":1`)).ok).toBe(true);
  });

  it('when a key is within the limit in characters but not in bytes (1,024 CJK characters: 3,072 bytes), then it is rejected as key_too_long; 341 of them (1,023 bytes) are accepted', () => {
    const cjk = '漢'.repeat(1024);
    expect(Buffer.byteLength(cjk)).toBe(3072);
    expect(parseRecord(withExtra(`"${cjk}":1`))).toMatchObject({
      ok: false,
      code: 'key_too_long',
      detail: expect.stringContaining('3072 bytes of UTF-8'),
    });
    expect(parseRecord(withExtra(`"n":{"${cjk}":1}`))).toMatchObject({ ok: false, code: 'key_too_long' });
    // Right at the line: 341 × 3 = 1023 bytes, plus one ASCII byte is 1024, plus two is 1025.
    expect(parseRecord(withExtra(`"${'漢'.repeat(341)}a":1`)).ok).toBe(true);
    expect(parseRecord(withExtra(`"${'漢'.repeat(341)}ab":1`))).toMatchObject({ code: 'key_too_long' });
    // Four bytes a character, two UTF-16 units: 256 emoji are 1,024 bytes, 257 are over.
    expect(parseRecord(withExtra(`"${'😀'.repeat(256)}":1`)).ok).toBe(true);
    expect(parseRecord(withExtra(`"${'😀'.repeat(257)}":1`))).toMatchObject({ code: 'key_too_long' });
  });

  it('when extra holds more than maxKeys keys over all depths, then it is rejected as too_many_keys; exactly maxKeys is accepted', () => {
    const keys = (n: number) => Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',');
    const half = RECORD_LIMITS.maxKeys / 2;
    expect(parseRecord(withExtra(`${keys(half)},"nested":{${keys(half - 1)}}`)).ok).toBe(true);
    expect(parseRecord(withExtra(`${keys(half)},"nested":{${keys(half)}}`))).toMatchObject({
      ok: false,
      code: 'too_many_keys',
    });
    expect(parseRecord(withExtra(keys(RECORD_LIMITS.maxKeys + 1)))).toMatchObject({
      ok: false,
      code: 'too_many_keys',
    });
  });
});

describe('schema drift and the record limits', () => {
  const many = Array.from({ length: RECORD_LIMITS.maxKeys + 1 }, (_, i) => `"k${i}":0`).join(',');
  const poison: Array<[string, string]> = [
    ['nesting_too_deep', withExtra(`"Region":"eu","x":${nested(10_000)}`)],
    ['too_many_keys', withExtra(many)],
    ['key_too_long', withExtra(`"Region":"eu","${'k'.repeat(10_000)}":1`)],
    ['key_too_long', withExtra(`"${'漢'.repeat(1024)}":1`)],
    ['number_out_of_range', withExtra('"Region":"eu","n":1e200000')],
    ['text_not_storable', withExtra('"Region":"eu\\u0000"')],
    ['invalid_uuid', JSON.stringify({ ...base, 'Message ID': 'not-a-uuid', Region: 'eu' })],
    ['missing_field', JSON.stringify({ ...base, 'User ID': undefined, Region: 'eu' })],
    ['wrong_type', JSON.stringify({ ...base, 'User ID': 7, Region: 'eu' })],
  ];

  it('when a line is quarantined (too deep, too many keys, a key too long, a bad id, a missing or non-string named field), then it leaves no drift, in evolve and in freeze', () => {
    for (const freeze of [false, true]) {
      for (const [code, line] of poison) {
        const r = parseRecord(line, { contract: exportContract({ freeze }) });
        expect(r, code).toMatchObject({ ok: false, code });
        expect(lastDrift(), `${code} (freeze ${freeze})`).toEqual([]);
      }
    }
  });

  it('when the contract is frozen and a line drifts, then its schema_drift reject keeps the drift (what `schema accept` releases)', () => {
    const r = parseRecord(withExtra('"Region":"eu"'), { contract: exportContract({ freeze: true }) });
    expect(r).toMatchObject({ ok: false, code: 'schema_drift' });
    expect(lastDrift()).toMatchObject([{ path: 'Region', kind: 'new_field', actual: 'string' }]);
  });

  it('when a loaded line has a 600-byte key, then its drift path is bounded to 512 bytes (prefix and hash), distinct keys stay distinct, and accepting the path (or the full key) makes it known', () => {
    const a = `${'漢'.repeat(190)}a`;
    const b = `${'漢'.repeat(190)}b`;
    expect(Buffer.byteLength(a)).toBe(571);
    const r = parseRecord(withExtra(`"${a}":1,"${b}":"x"`));
    expect(r.ok).toBe(true);
    const notes = lastDrift().map((d) => ({ ...d }));
    expect(notes.map((d) => d.path)).toEqual([storedKey(a), storedKey(b)]);
    for (const d of notes) {
      expect(Buffer.byteLength(d.path)).toBeLessThanOrEqual(STORED_KEY_BYTES);
      expect(d.path).toMatch(/^漢+…#[0-9a-f]{16}$/);
    }
    expect(notes[0]?.path).not.toBe(notes[1]?.path);
    for (const accepted of [[storedKey(a)], [a]]) {
      parseRecord(withExtra(`"${a}":1`), { contract: exportContract({ accepted, freeze: true }) });
      expect(lastDrift()).toEqual([]);
    }
  });
});

describe('dayOfTimeText', () => {
  it('when the time is valid, then its UTC date; when only its date is a calendar date, then that date; else null', () => {
    expect(dayOfTimeText('2026-11-20T23:30:00-02:00')).toBe('2026-11-21');
    expect(dayOfTimeText('2026-11-20 09:15:30')).toBe('2026-11-20');
    expect(dayOfTimeText('2026-02-30T10:00:00Z')).toBeNull();
    expect(dayOfTimeText('2026-02-29T10:00:00Z')).toBeNull();
    expect(dayOfTimeText('2028-02-29T10:00:00Z')).toBe('2028-02-29');
    expect(dayOfTimeText('2026-13-01T10:00:00Z')).toBeNull();
    expect(dayOfTimeText('0000-01-01T00:00:00Z')).toBeNull();
    expect(dayOfTimeText('2026-11')).toBeNull();
  });
});

// The range rule is PostgreSQL's: held to it against a real server, at and across each boundary.
describe('numericInRange against PostgreSQL', () => {
  let client: pg.Client;
  beforeAll(async () => {
    client = new pg.Client({ connectionString: inject('databaseUrl') });
    await client.connect();
  });
  afterAll(async () => {
    await client.end();
  });

  it('when a number is at or just beyond a numeric boundary, then numericInRange agrees with jsonb', async () => {
    const cases = [
      '1e131071',
      '1e131072',
      '9.999e131071',
      '99999e131067',
      '99999e131068',
      '0.001e131074',
      '0.001e131075',
      '1e-16383',
      '1e-16384',
      '1.5e-16382',
      '1.5e-16383',
      '0e-16383',
      '0e-16384',
      '0.0e-16383',
      '0e131072',
      '0e999999',
      '-1E+400',
      '1e-400',
      '-0',
      '0.000000000000000000001',
      `0.${'0'.repeat(16_382)}1`,
      `0.${'0'.repeat(16_383)}1`,
      `1${'0'.repeat(131_071)}`,
      `1${'0'.repeat(131_072)}`,
      `1${'0'.repeat(131_072)}e-1`,
    ];
    for (const n of cases) {
      const pgSays = await client.query('select $1::jsonb is not null as ok', [n]).then(
        () => true,
        (err: { code?: string }) => {
          if (err.code !== '22003') throw err;
          return false;
        },
      );
      expect(numericInRange(n), n.length > 40 ? `${n.slice(0, 20)}…(${n.length})` : n).toBe(pgSays);
    }
  });
});
