import { daysFromCivil } from '../../common/civil-date.ts';
import { MESSAGE_TUPLE_COLUMNS } from '../../warehouse/load/batch.ts';
import { recordHashOf } from '../parse/record-hash.ts';
import type { ExportRecord } from '../parse/record-parser.ts';
import { HEX_VALUE } from '../parse/uuid-form.ts';

/**
 * PostgreSQL's binary COPY format for `analytics_messages` rows, written straight into a reusable
 * byte buffer as each line is parsed.
 *
 * Why: a row's texts (1-2 KB) are copied once into the batch's buffer and then die young, instead
 * of living as JavaScript strings until the batch is sent (long enough to be promoted to V8's old
 * space, the main cause of the loader's memory growth); the server reads uuids, times and numbers
 * in their binary form instead of parsing text; and COPY costs the server less per row than a
 * multi-row INSERT.
 *
 * Format: https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.4 (header, one
 * tuple per row: int16 field count, then per field an int32 byte length, -1 for NULL, and the
 * bytes; trailer int16 -1). Integers are big-endian. Binary forms used: uuid 16 bytes, date int32
 * days since 2000-01-01, timestamptz int64 microseconds since 2000-01-01 00:00 UTC, bigint int64,
 * text its UTF-8 bytes, jsonb a version byte (1) then the JSON text.
 */

/**
 * The columns of every tuple, in order: the warehouse's COPY statements name them
 * (src/warehouse/load/batch.ts), and `putMessageTuple` writes its fields in this order.
 */
export const TUPLE_COLUMNS = MESSAGE_TUPLE_COLUMNS;

export const COPY_HEADER = Buffer.from([
  0x50,
  0x47,
  0x43,
  0x4f,
  0x50,
  0x59,
  0x0a,
  0xff,
  0x0d,
  0x0a,
  0x00, // PGCOPY\n\xff\r\n\0
  0,
  0,
  0,
  0, // flags
  0,
  0,
  0,
  0, // header extension length
]);
export const COPY_TRAILER = Buffer.from([0xff, 0xff]);

/** A growable byte buffer, reused from batch to batch (`reset`), so its memory is allocated once. */
export class ByteSink {
  buf: Buffer;
  len = 0;

  constructor(initial = 1 << 21) {
    this.buf = Buffer.allocUnsafe(initial);
  }

  reset(): void {
    this.len = 0;
  }

  /** Room for `n` more bytes. Rows keep offsets, not views, so growing never invalidates them. */
  ensure(n: number): void {
    const need = this.len + n;
    if (need <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < need) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }

  /** Appends `bytes` as they are; returns where they start. */
  put(bytes: Uint8Array): number {
    this.ensure(bytes.length);
    const at = this.len;
    this.buf.set(bytes, at);
    this.len += bytes.length;
    return at;
  }

  /** The bytes from `start` to `end` (a view: valid until the sink is reset). */
  view(start: number, end: number): Buffer {
    return this.buf.subarray(start, end);
  }
}

function putUuid(s: ByteSink, uuid: string): void {
  const b = s.buf;
  let o = s.len;
  b.writeInt32BE(16, o);
  o += 4;
  // 8-4-4-4-12: skip the dashes at 8, 13, 18, 23 (the parser has checked the form).
  for (let i = 0; i < 36; i += 2) {
    if (i === 8 || i === 13 || i === 18 || i === 23) i++;
    b[o++] = ((HEX_VALUE[uuid.charCodeAt(i)] ?? 0) << 4) | (HEX_VALUE[uuid.charCodeAt(i + 1)] ?? 0);
  }
  s.len = o;
}

const TWO_32 = 2 ** 32;
// 86,400,000,000 µs per day = 20 · 2^32 + 500,654,080: keeps every product below 2^53, so a
// timestamp anywhere in years 1-9999 is written exactly without BigInt.
const DAY_HI = 20;
const DAY_LO = 500_654_080;

function putInt64(s: ByteSink, hi: number, lo: number): void {
  s.buf.writeInt32BE(8, s.len);
  s.buf.writeInt32BE(hi, s.len + 4);
  s.buf.writeUInt32BE(lo, s.len + 8);
  s.len += 12;
}

function putBigint(s: ByteSink, v: number): void {
  const hi = Math.floor(v / TWO_32);
  putInt64(s, hi, v - hi * TWO_32);
}

function digits(t: string, from: number, to: number): number {
  let v = 0;
  for (let i = from; i < to; i++) v = v * 10 + (t.charCodeAt(i) - 48);
  return v;
}

const EPOCH_2000 = daysFromCivil(2000, 1, 1);

/**
 * `messageTime` as normalised by the parser (`YYYY-MM-DDTHH:MM:SS[.f{1,6}]Z`, UTC) and its date:
 * days since 2000-01-01 and microseconds since 2000-01-01 00:00 UTC.
 */
function putTime(s: ByteSink, t: string): number {
  const days = daysFromCivil(digits(t, 0, 4), digits(t, 5, 7), digits(t, 8, 10)) - EPOCH_2000;
  let micros = (digits(t, 11, 13) * 3600 + digits(t, 14, 16) * 60 + digits(t, 17, 19)) * 1_000_000;
  if (t.charCodeAt(19) === 46) {
    // '.': 1-6 digits, then 'Z'
    const end = t.length - 1;
    micros += digits(t, 20, end) * 10 ** (6 - (end - 20));
  }
  const low = days * DAY_LO + micros;
  const carry = Math.floor(low / TWO_32);
  putInt64(s, days * DAY_HI + carry, low - carry * TWO_32);
  return days;
}

function putText(s: ByteSink, v: string): void {
  // At most 3 UTF-8 bytes per UTF-16 unit: reserving that skips a byte-length pass over the text.
  s.ensure(4 + v.length * 3);
  const n = s.buf.write(v, s.len + 4, 'utf8');
  s.buf.writeInt32BE(n, s.len);
  s.len += 4 + n;
}

/**
 * Appends one tuple for `rec` and returns where it starts. `lineHash` is the sha1 hex of the
 * source line. A record parsed without its hash (`recordHash` '') gets it here, from the texts'
 * encoded bytes (record-hash.ts: the same value), before it is written.
 */
export function putMessageTuple(
  s: ByteSink,
  rec: ExportRecord,
  lineNo: number,
  loadId: string,
  lineHash: string,
): number {
  const start = s.len;
  // Fixed part: field count, 3 uuids, time, date, line number (bytes below), texts reserve their own.
  s.ensure(2 + 3 * 20 + 12 + 8 + 12);
  s.buf.writeInt16BE(TUPLE_COLUMNS.length, s.len);
  s.len += 2;
  putUuid(s, rec.messageId);
  putUuid(s, rec.threadId);
  putUuid(s, rec.userId);
  const days = putTime(s, rec.messageTime);
  s.buf.writeInt32BE(4, s.len);
  s.buf.writeInt32BE(days, s.len + 4);
  s.len += 8;
  const inputAt = s.len + 4;
  putText(s, rec.input);
  const responseAt = s.len + 4;
  putText(s, rec.response);
  const responseEnd = s.len;
  if (rec.recordHash === '') {
    rec.recordHash = recordHashOf(
      rec.messageId,
      rec.threadId,
      rec.userId,
      rec.messageTime,
      rec.input.length,
      s.view(inputAt, responseAt - 4),
      rec.response.length,
      s.view(responseAt, responseEnd),
      rec.extra,
    );
  }
  if (rec.extra === null) {
    s.ensure(4);
    s.buf.writeInt32BE(-1, s.len);
    s.len += 4;
  } else {
    const json = JSON.stringify(rec.extra);
    s.ensure(5 + json.length * 3);
    s.buf[s.len + 4] = 1; // jsonb binary format version
    const n = s.buf.write(json, s.len + 5, 'utf8');
    s.buf.writeInt32BE(n + 1, s.len);
    s.len += 5 + n;
  }
  putText(s, rec.recordHash);
  s.ensure(12);
  putBigint(s, lineNo);
  putText(s, loadId);
  putText(s, lineHash);
  s.ensure(8);
  s.buf.writeInt32BE(4, s.len);
  s.buf.writeInt32BE(responseCharsOf(rec.response, s.buf, responseAt, responseEnd), s.len + 4);
  s.len += 8;
  return start;
}

// The white space btrim is given in `response_chars`'s definition (space, tab, LF, CR, FF, VT).
function isTrimmed(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13);
}
const SURROGATE = /[\uD800-\uDFFF]/;
const HIGH_SURROGATES = /[\uD800-\uDBFF]/g;

/**
 * Characters of `response` without leading and trailing white space, as PostgreSQL computes
 * `length(btrim(response, E' \t\n\r\f\x0B'))`: code points (a surrogate pair is one; the
 * parser has rejected lone surrogates), 0 for an empty or blank response.
 */
export function responseChars(text: string): number {
  const units = trimmedUnits(text);
  if (units === 0 || !SURROGATE.test(text)) return units;
  return units - (text.match(HIGH_SURROGATES)?.length ?? 0);
}

/**
 * responseChars, given also the text's UTF-8 bytes `buf[at, end)`: a surrogate pair is a 4-byte
 * sequence there, whose lead byte (0xF0-0xF4) occurs nowhere else in valid UTF-8, so the pairs
 * are counted by a memchr per lead byte instead of a scan of the string in JavaScript (a third of
 * the cost). The trimmed white space is ASCII, so every pair lies inside the trimmed part.
 */
export function responseCharsOf(text: string, buf: Buffer, at: number, end: number): number {
  const units = trimmedUnits(text);
  // Only ASCII when every unit is one byte: no pair.
  if (units === 0 || end - at === text.length) return units;
  const bytes = buf.subarray(at, end);
  let pairs = 0;
  for (let lead = 0xf0; lead <= 0xf4; lead++) {
    for (let i = bytes.indexOf(lead); i !== -1; i = bytes.indexOf(lead, i + 4)) pairs++;
  }
  return units - pairs;
}

function trimmedUnits(text: string): number {
  let from = 0;
  let to = text.length;
  while (from < to && isTrimmed(text.charCodeAt(from))) from++;
  while (to > from && isTrimmed(text.charCodeAt(to - 1))) to--;
  return to - from;
}
