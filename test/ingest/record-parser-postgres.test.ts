import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseRecord } from '../../src/ingest/parse/record-parser.ts';

// The parser promises values PostgreSQL takes exactly; this holds it to that against a real server.
const fixtures = new URL('../fixtures/bad-lines/', import.meta.url);
const lines = readFileSync(new URL('records.jsonl', fixtures), 'utf8').split('\n').slice(0, -1);

const base = {
  Input: 'q',
  Response: 'a',
  'Message ID': '3f1c2a9e-8b7d-4c6e-9a1b-2d3e4f5a6b7c',
  'Message Time': '2026-11-20T09:15:30.250Z',
  'Thread ID': '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
  'User ID': '0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6',
};

let client: pg.Client;
beforeAll(async () => {
  client = new pg.Client({ connectionString: inject('databaseUrl') });
  await client.connect();
});
afterAll(async () => {
  await client.end();
});

describe('parsed records in PostgreSQL', () => {
  it('when an accepted messageTime is cast to timestamptz, then its UTC text and date are unchanged', async () => {
    const times = [
      ...lines.map((l) => parseRecord(l)).flatMap((r) => (r.ok ? [r.record] : [])),
      ...['2026-11-20T13:59:59.999999+14:00', '2026-11-20T12:00:00.000001-12:00', '0001-01-01T00:00:00Z'].map(
        (t) => {
          const r = parseRecord(JSON.stringify({ ...base, 'Message Time': t }));
          if (!r.ok) throw new Error(r.detail);
          return r.record;
        },
      ),
    ];
    expect(times.length).toBeGreaterThan(10);
    for (const rec of times) {
      const { rows } = await client.query(
        `select to_char($1::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') as t,
                ($1::timestamptz at time zone 'UTC')::date::text as d`,
        [rec.messageTime],
      );
      const [whole, frac = ''] = rec.messageTime.slice(0, -1).split('.');
      expect(rows[0].t, rec.messageTime).toBe(`${whole}.${frac.padEnd(6, '0')}`);
      expect(rows[0].d, rec.messageTime).toBe(rec.messageDate);
    }
  });

  it('when accepted texts and extra are stored as text and jsonb, then they come back equal', async () => {
    const text = `${JSON.stringify({ ...base, Input: 'é 😀 \\ "x"', Response: '\u0001\u001f' }).slice(0, -1)}, "big": 12345678901234567891, "pi": 3.14159265358979323846, "n": {"k": [1, null, "v"]}}`;
    const r = parseRecord(text);
    if (!r.ok) throw new Error(r.detail);
    const { rows } = await client.query('select $1::text as i, $2::text as r, $3::jsonb::text as e', [
      r.record.input,
      r.record.response,
      JSON.stringify(r.record.extra),
    ]);
    expect(rows[0]).toEqual({
      i: r.record.input,
      r: r.record.response,
      e: '{"n": {"k": [1, null, "v"]}, "pi": 3.14159265358979323846, "big": 12345678901234567891}',
    });
  });

  it('when a record is rejected as text_not_storable, then PostgreSQL refuses it as stored (texts as text, the record as jsonb)', async () => {
    const bad = lines
      .map((l) => [l, parseRecord(l)] as const)
      .filter(([, r]) => !r.ok && r.code === 'text_not_storable');
    expect(bad.length).toBeGreaterThanOrEqual(5);
    for (const [line] of bad) {
      const obj = JSON.parse(line) as Record<string, unknown>;
      // Stored the way the loader stores them: texts as text, the rest as jsonb.
      const refused = await client
        .query('select $1::text, $2::text, $3::jsonb', [obj.Input, obj.Response, JSON.stringify(obj)])
        .then(
          () => false,
          () => true,
        );
      expect(refused, line.slice(0, 60)).toBe(true);
    }
  });
});
