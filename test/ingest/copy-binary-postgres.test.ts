import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import {
  ByteSink,
  COPY_HEADER,
  COPY_TRAILER,
  putMessageTuple,
  responseChars,
  TUPLE_COLUMNS,
} from '../../src/ingest/merge/copy-binary.ts';
import { type ExportRecord, parseRecord } from '../../src/ingest/parse/record-parser.ts';

// The binary tuples the loader writes, held against what PostgreSQL makes of the same values in
// text form: every column read back must equal the text form's cast, through a real COPY.

const base = {
  Input: 'q',
  Response: 'a',
  'Message ID': '3f1c2a9e-8b7d-4c6e-9a1b-2d3e4f5a6b7c',
  'Message Time': '2026-11-20T09:15:30.250Z',
  'Thread ID': '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
  'User ID': '0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6',
};

interface Encoded {
  line: string;
  rec: ExportRecord;
  lineNo: number;
  loadId: string;
  lineHash: string;
}

let idSeq = 0;
/** A distinct, upper-case message id per record (the parser lower-cases it). */
function nextId(): string {
  const h = createHash('sha1').update(`copy-binary:${idSeq++}`).digest('hex').toUpperCase();
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-A${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

let lineSeq = 1;
function encoded(fields: Record<string, unknown>, opts: { lineNo?: number; line?: string } = {}): Encoded {
  const line = opts.line ?? JSON.stringify({ ...base, 'Message ID': nextId(), ...fields });
  const r = parseRecord(line);
  if (!r.ok) throw new Error(`${r.code}: ${r.detail}`);
  return {
    line,
    rec: r.record,
    lineNo: opts.lineNo ?? lineSeq++,
    loadId: `load-${lineSeq % 7}-ü`,
    lineHash: createHash('sha1').update(line).digest('hex'),
  };
}

function put(sink: ByteSink, e: Encoded): { at: number; end: number } {
  const at = putMessageTuple(sink, e.rec, e.lineNo, e.loadId, e.lineHash);
  return { at, end: sink.len };
}

const TYPES: Record<(typeof TUPLE_COLUMNS)[number], string> = {
  message_id: 'uuid',
  thread_id: 'uuid',
  user_id: 'uuid',
  message_time: 'timestamptz',
  message_date: 'date',
  input: 'text',
  response: 'text',
  extra: 'jsonb',
  record_hash: 'text',
  _source_line: 'bigint',
  _load_id: 'text',
  line_hash: 'text',
  response_chars: 'integer',
};

// Every column in a text form that is exact: ids, times at UTC with microseconds, jsonb canonical.
const AS_TEXT = `message_id::text as message_id, thread_id::text as thread_id, user_id::text as user_id,
  to_char(message_time at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') as utc, message_time::text as message_time,
  message_date::text as message_date, input, response, extra::text as extra, record_hash,
  _source_line::text as _source_line, _load_id, line_hash, response_chars::text as response_chars`;

let client: pg.Client;
beforeAll(async () => {
  client = new pg.Client({ connectionString: inject('databaseUrl') });
  await client.connect();
  // A fixed zone other than UTC, so a time written in the wrong zone shows in the text forms.
  await client.query("set timezone = 'America/St_Johns'");
  await client.query(
    `create temporary table copied (${TUPLE_COLUMNS.map((c) => `${c} ${TYPES[c]}`).join(', ')})`,
  );
});
afterAll(async () => {
  await client?.end();
});
beforeEach(async () => {
  await client.query('truncate copied');
});

async function copy(chunks: Buffer[]): Promise<void> {
  await pipeline(
    Readable.from([COPY_HEADER, ...chunks, COPY_TRAILER]),
    client.query(copyFrom(`copy copied (${TUPLE_COLUMNS.join(',')}) from stdin (format binary)`)),
  );
}

/** The row read back, and the same values cast from their text form by PostgreSQL. */
async function storedAndExpected(e: Encoded) {
  const stored = await client.query(`select ${AS_TEXT} from copied where _source_line = $1::bigint`, [
    String(e.lineNo),
  ]);
  const expected = await client.query(
    `select ${AS_TEXT} from (select $1::uuid as message_id, $2::uuid as thread_id, $3::uuid as user_id,
       $4::timestamptz as message_time, $5::date as message_date, $6::text as input, $7::text as response,
       $8::jsonb as extra, $9::text as record_hash, $10::bigint as _source_line, $11::text as _load_id,
       $12::text as line_hash,
       -- What the column's generated expression was before the loader wrote it (migration T04).
       length(btrim($7::text, E' \t\n\r\f\x0B')) as response_chars) e`,
    [
      e.rec.messageId,
      e.rec.threadId,
      e.rec.userId,
      e.rec.messageTime,
      e.rec.messageDate,
      e.rec.input,
      e.rec.response,
      e.rec.extra === null ? null : JSON.stringify(e.rec.extra),
      e.rec.recordHash,
      String(e.lineNo),
      e.loadId,
      e.lineHash,
    ],
  );
  // The direct comparisons too, in the column types (not only through their text).
  const same = await client.query(
    `select message_id = $1::uuid and thread_id = $2::uuid and user_id = $3::uuid
        and message_time = $4::timestamptz and message_date = $5::date
        and (message_time at time zone 'UTC')::date = message_date
        and input = $6::text and response = $7::text and extra is not distinct from $8::jsonb
        and record_hash = $9 and _load_id = $10 and line_hash = $11 as same
     from copied where _source_line = $12::bigint`,
    [
      e.rec.messageId,
      e.rec.threadId,
      e.rec.userId,
      e.rec.messageTime,
      e.rec.messageDate,
      e.rec.input,
      e.rec.response,
      e.rec.extra === null ? null : JSON.stringify(e.rec.extra),
      e.rec.recordHash,
      e.loadId,
      e.lineHash,
      String(e.lineNo),
    ],
  );
  return { stored: stored.rows, expected: expected.rows, same: same.rows.map((r) => r.same) };
}

async function expectRoundTrip(records: Encoded[]): Promise<void> {
  const { rows } = await client.query('select count(*)::int as n from copied');
  expect(rows[0].n).toBe(records.length);
  for (const e of records) {
    const { stored, expected, same } = await storedAndExpected(e);
    expect(stored, e.line.slice(0, 200)).toEqual(expected);
    expect(same, e.line.slice(0, 200)).toEqual([true]);
  }
}

async function encodeAndCopy(records: Encoded[], sink = new ByteSink()): Promise<void> {
  for (const e of records) put(sink, e);
  await copy([sink.view(0, sink.len)]);
}

describe('binary COPY tuples', () => {
  it('when times have 0 to 6 fractional digits, then each is stored as the timestamptz and date of its text', async () => {
    const times = [
      '2024-05-06T07:08:09Z',
      '2024-05-06T07:08:09.1Z',
      '2024-05-06T07:08:09.12Z',
      '2024-05-06T07:08:09.123Z',
      '2024-05-06T07:08:09.1234Z',
      '2024-05-06T07:08:09.12345Z',
      '2024-05-06T07:08:09.123456Z',
      '2024-05-06T07:08:09.000001Z',
      '2024-05-06T07:08:09.000010Z',
      '2024-05-06T07:08:09.999999Z',
      '2024-05-06T07:08:09.1234569Z', // truncated by the parser to 6 digits
      '2024-05-06T23:59:59.999999Z',
      '2024-05-06T00:00:00.000001+00:00',
      '2024-05-07T01:30:00.5+02:00', // UTC 2024-05-06T23:30:00.5
      '2024-05-06T20:00:00.25-05:00', // UTC 2024-05-07T01:00:00.25
    ];
    const recs = times.map((t) => encoded({ 'Message Time': t }));
    expect(recs.map((r) => r.rec.messageTime)).toContain('2024-05-06T07:08:09.00001Z');
    await encodeAndCopy(recs);
    await expectRoundTrip(recs);
    const utc = await client.query(`select to_char(message_time at time zone 'UTC', 'HH24:MI:SS.US') as t
      from copied order by _source_line`);
    expect(utc.rows.map((r) => r.t).slice(0, 7)).toEqual([
      '07:08:09.000000',
      '07:08:09.100000',
      '07:08:09.120000',
      '07:08:09.123000',
      '07:08:09.123400',
      '07:08:09.123450',
      '07:08:09.123456',
    ]);
  });

  it('when times are at the ends of the range, before 2000, at the 2000 epoch or on a leap day, then they are stored exactly', async () => {
    const times = [
      '0001-01-01T00:00:00Z',
      '0001-01-01T00:00:00.000001Z',
      '0001-03-01T12:34:56.789Z',
      '9999-12-31T23:59:59.999999Z',
      '9999-12-31T00:00:00Z',
      '1969-12-31T23:59:59.999999Z',
      '1970-01-01T00:00:00Z',
      '1900-02-28T23:59:59.5Z',
      '1600-02-29T06:00:00Z',
      '1999-12-31T23:59:59.999999Z',
      '2000-01-01T00:00:00Z',
      '2000-01-01T00:00:00.000001Z',
      '2000-02-29T00:00:00Z',
      '2024-02-29T00:00:00Z',
      '2024-02-29T23:59:59.999999Z',
      '2024-03-01T00:00:00Z',
      '2100-03-01T00:00:00Z',
      '2038-01-19T03:14:08Z', // 2^31 seconds after 1970
      '2136-02-07T06:28:16Z', // about 2^32 seconds after 2000
    ];
    const recs = times.map((t) => encoded({ 'Message Time': t }));
    await encodeAndCopy(recs);
    await expectRoundTrip(recs);
    const dates = await client.query('select message_date::text as d from copied order by _source_line');
    expect(dates.rows.map((r) => r.d)).toEqual(times.map((t) => t.slice(0, 10)));
  });

  it('when ids are upper case in the line, then the stored uuids equal the uuids of the line text', async () => {
    const e = encoded({
      'Thread ID': 'ABCDEF01-2345-4789-ABCD-EF0123456789',
      'User ID': 'FfFfFfFf-0000-4aAa-bBbB-0123456789aB',
    });
    await encodeAndCopy([e]);
    await expectRoundTrip([e]);
    const raw = JSON.parse(e.line) as Record<string, string>;
    const { rows } = await client.query(
      `select message_id = $1::uuid and thread_id = $2::uuid and user_id = $3::uuid as same from copied`,
      [raw['Message ID'], raw['Thread ID'], raw['User ID']],
    );
    expect(rows).toEqual([{ same: true }]);
    expect(raw['Message ID']).not.toBe(e.rec.messageId);
  });

  it('when texts hold 2-, 3- and 4-byte UTF-8 characters, escapes or nothing, then they come back exactly', async () => {
    const texts = [
      ['', ''],
      ['é', 'ß ü ñ'],
      ['中文 ✓ €', '\u0800\uffff'],
      ['😀', '👩‍👩‍👧‍👦 𝄞'],
      ['line1\nline2\ttab \\ "quoted"', '\u0001\u001f\u007f'],
      ['中'.repeat(5000), '😀'.repeat(5000)],
      [' ', '\r\n'],
    ];
    const recs = texts.map(([Input, Response]) => encoded({ Input, Response }));
    await encodeAndCopy(recs);
    await expectRoundTrip(recs);
    const empty = await client.query(
      'select input is not null and input = $1 and response = $1 as empty from copied where _source_line = $2::bigint',
      ['', String(recs[0]!.lineNo)],
    );
    expect(empty.rows).toEqual([{ empty: true }]);
    const lengths = await client.query(
      'select octet_length(input)::int as i, octet_length(response)::int as r from copied order by _source_line',
    );
    expect(lengths.rows).toEqual(
      texts.map(([i, r]) => ({ i: Buffer.byteLength(i!), r: Buffer.byteLength(r!) })),
    );
  });

  it('when responses have white space, surrogate pairs or other spaces at their ends, then response_chars equals PostgreSQL’s length(btrim(...))', async () => {
    const responses = [
      '',
      ' ',
      ' \t\n\r\f\v ',
      'x',
      '  x  ',
      '\v\fx y\r\n',
      '😀',
      ' 😀 ',
      '😀 x 😀',
      '\u00a0x\u00a0', // no-break space: not in the trimmed set
      '\u2003x\u3000', // em space, ideographic space: kept too
      '\u0085x', // next line (NEL): kept
      'a\u0001',
      `${'中😀'.repeat(700)}\n`,
    ];
    const recs = responses.map((Response) => encoded({ Response }));
    await encodeAndCopy(recs);
    await expectRoundTrip(recs);
    const { rows } = await client.query(
      `select response_chars as stored, length(btrim(response, E' \\t\\n\\r\\f\\x0B')) as pg from copied order by _source_line`,
    );
    expect(rows.map((r) => r.stored)).toEqual(rows.map((r) => r.pg));
    expect(rows.map((r) => r.stored)).toEqual(responses.map((r) => responseChars(r)));
    expect(rows.slice(0, 4).map((r) => r.stored)).toEqual([0, 0, 0, 1]);
  });

  it('when extra is absent, then it is stored as SQL NULL; when it has nested values and numbers beyond double precision, then they are kept exactly', async () => {
    const none = encoded({});
    expect(none.rec.extra).toBeNull();
    const nested = encoded(
      {},
      {
        line: `${JSON.stringify({ ...base, 'Message ID': nextId() }).slice(0, -1)}, "big": 12345678901234567891, "neg": -98765432109876543210, "pi": 3.14159265358979323846, "huge": 1e400, "n": {"k": [1, null, "v", {"deep": [true, false, 9007199254740993]}], "é😀": "✓"}, "nul": null, "__proto__": {"x": 1}, "s": ""}`,
      },
    );
    expect(nested.rec.extra).not.toBeNull();
    const plain = encoded({ tags: ['a', 'b'], score: 0.5, flag: false, empty: {} });
    const recs = [none, nested, plain];
    await encodeAndCopy(recs);
    await expectRoundTrip(recs);
    const { rows } = await client.query(
      `select extra is null as is_null, extra->>'big' as big, extra->>'neg' as neg, extra->>'pi' as pi,
              extra #>> '{n,k,3,deep,2}' as deep, extra->'nul' = 'null'::jsonb as json_null, extra->'__proto__' as proto
       from copied order by _source_line`,
    );
    expect(rows[0]).toMatchObject({ is_null: true });
    expect(rows[1]).toEqual({
      is_null: false,
      big: '12345678901234567891',
      neg: '-98765432109876543210',
      pi: '3.14159265358979323846',
      deep: '9007199254740993',
      json_null: true,
      proto: { x: 1 },
    });
  });

  it('when line numbers exceed 2^31 and 2^32, then the bigint holds them exactly', async () => {
    const numbers = [
      1,
      2 ** 31 - 1,
      2 ** 31,
      2 ** 32 - 1,
      2 ** 32,
      2 ** 32 + 1,
      2 ** 40 + 12345,
      2 ** 52 + 1,
      Number.MAX_SAFE_INTEGER,
    ];
    const recs = numbers.map((lineNo) => encoded({}, { lineNo }));
    await encodeAndCopy(recs);
    await expectRoundTrip(recs);
    const { rows } = await client.query('select _source_line::text as n from copied order by _source_line');
    expect(rows.map((r) => r.n)).toEqual(numbers.map((n) => String(n)));
  });

  it('when a long text makes a tiny sink grow, then the tuples written before the growth are unchanged and every offset still delimits its tuple', async () => {
    const sink = new ByteSink(64);
    const small1 = encoded({ Input: 'first é', Response: '😀' });
    const small2 = encoded({ Input: 'second', Response: '' });
    const long = encoded({ Input: '中'.repeat(100_000), Response: `${'😀'.repeat(30_000)}end`, extra: 'x' });
    const small3 = encoded({ Input: 'after', Response: 'the growth' });
    const records = [small1, small2, long, small3];

    const spans: { at: number; end: number }[] = [];
    const bytesBefore: Buffer[] = [];
    const sizes: number[] = [];
    for (const e of records) {
      spans.push(put(sink, e));
      const last = spans.at(-1)!;
      bytesBefore.push(Buffer.from(sink.view(last.at, last.end)));
      sizes.push(sink.buf.length);
    }
    expect(sizes[0]).toBeGreaterThan(64);
    expect(sizes[2]).toBeGreaterThan(300_000 + 90_000);
    expect(spans.map((s) => s.at)).toEqual([0, spans[0]!.end, spans[1]!.end, spans[2]!.end]);
    expect(sink.len).toBe(spans[3]!.end);
    // Bytes of each tuple read through its offsets after all growth equal those read at once.
    for (let i = 0; i < records.length; i++) {
      expect(Buffer.from(sink.view(spans[i]!.at, spans[i]!.end)).equals(bytesBefore[i]!)).toBe(true);
    }
    // Each span is a whole tuple on its own: sent in reverse order, every record comes back.
    await copy(spans.toReversed().map((s) => sink.view(s.at, s.end)));
    await expectRoundTrip(records);
  });

  it('when a sink is reset and reused, then the new tuples are read back and none of the old ones', async () => {
    const sink = new ByteSink(64);
    const old = [encoded({ Input: 'x'.repeat(5000) }), encoded({})];
    for (const e of old) put(sink, e);
    sink.reset();
    const fresh = [encoded({ Input: 'new one' }), encoded({ Response: 'ü'.repeat(10) })];
    const spans = fresh.map((e) => put(sink, e));
    expect(spans[0]!.at).toBe(0);
    await copy([sink.view(0, sink.len)]);
    await expectRoundTrip(fresh);
  });

  it('when a tuple is counted, then it has as many fields as TUPLE_COLUMNS names', () => {
    const sink = new ByteSink(64);
    const e = encoded({});
    const { at } = put(sink, e);
    expect(sink.buf.readInt16BE(at)).toBe(TUPLE_COLUMNS.length);
    expect(COPY_HEADER.length).toBe(19);
    expect(COPY_TRAILER.readInt16BE(0)).toBe(-1);
  });
});
