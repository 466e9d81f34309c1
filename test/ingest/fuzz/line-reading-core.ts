import { isUtf8 } from 'node:buffer';
import { quickMessageId } from '../../../src/ingest/merge/fast-path.ts';
import { dayOfRaw, dayOfTimeValue, textReject } from '../../../src/ingest/merge/pending.ts';
import { LineFieldScanner, lineFields } from '../../../src/ingest/parse/line-fields.ts';
import { parseRecord } from '../../../src/ingest/parse/record-parser.ts';
import { uuidForm } from '../../../src/ingest/parse/uuid-form.ts';
import type { Rng } from '../../../src/simulator/prng.ts';

/**
 * Lines built to trip the readers that take a line's id, time or key from its bytes without
 * parsing it (line-fields.ts, fast-path.ts, the reject's day and id in pending.ts), and the oracle
 * they must agree with: JSON.parse of the line. The keys are spelled every way JSON allows
 * (`\u00XX` escapes of any of their characters in either hex case, duplicated in any spelling,
 * near-misses that differ only in an escape such as `Message\/ID`), nested in other fields,
 * quoted inside `Input`/`Response` text, surrounded by JSON white space, next to invalid UTF-8,
 * a BOM, deep nesting and long keys; ids are numbers, objects, escaped, upper-case, braced.
 * A reader may say it cannot tell (null, undefined); it may never name another id or time.
 */

const HEX = '0123456789abcdef';
const NAMED = ['Message ID', 'Thread ID', 'User ID', 'Message Time', 'Input', 'Response'] as const;

export interface LineCase {
  bytes: Buffer;
  /** What the generator meant (for a failure's message). */
  note: string;
}

function uuid(rng: Rng): string {
  let s = '';
  for (let i = 0; i < 32; i++) {
    if (i === 8 || i === 12 || i === 16 || i === 20) s += '-';
    s += HEX[rng.int(16)];
  }
  return s;
}

/** A JSON string literal of `s` with some characters written as `\uXXXX` (hex in either case). */
function escapedLiteral(rng: Rng, s: string, share: number): string {
  let out = '"';
  for (const ch of s) {
    const code = ch.codePointAt(0) as number;
    if (code > 0xffff) {
      // A surrogate pair, escaped or not.
      out += rng.chance(share) ? surrogates(rng, code) : ch;
    } else if (rng.chance(share)) {
      let hex = code.toString(16).padStart(4, '0');
      if (rng.chance(0.5)) hex = hex.toUpperCase();
      out += `\\u${hex}`;
    } else out += JSON.stringify(ch).slice(1, -1);
  }
  return `${out}"`;
}

function surrogates(rng: Rng, code: number): string {
  const v = code - 0x10000;
  const hi = (0xd800 + (v >> 10)).toString(16);
  const lo = (0xdc00 + (v & 0x3ff)).toString(16);
  return rng.chance(0.5) ? `\\u${hi}\\u${lo}` : `\\u${hi.toUpperCase()}\\u${lo.toUpperCase()}`;
}

/**
 * Whether the line being built is hostile: its keys spelled with escapes. Half the lines are
 * not, so that the fast path (which gives up on such escapes) is taken often enough to be tested.
 */
let hostile = false;

/** A spelling of `key`: as written, or with escapes JSON.parse decodes back to it. */
function spell(rng: Rng, key: string): string {
  if (!hostile) return JSON.stringify(key);
  const r = rng.next();
  if (r < 0.55) return JSON.stringify(key);
  if (r < 0.8) return escapedLiteral(rng, key, 0.15);
  if (r < 0.9) return escapedLiteral(rng, key, 1);
  // One character escaped, the rest plain: the smallest difference in bytes.
  const at = rng.int(key.length);
  return `${JSON.stringify(key.slice(0, at)).slice(0, -1)}\\u${key.charCodeAt(at).toString(16).padStart(4, '0')}${JSON.stringify(key.slice(at + 1)).slice(1)}`;
}

/** A key that is not one of the named ones but looks like one in its bytes. */
function nearMiss(rng: Rng): string {
  return rng.pick([
    '"Message\\/ID"',
    '"Message\\u0020Id"',
    '"Message  ID"',
    '"message id"',
    '"Message ID "',
    '" Message ID"',
    '"Message\\u00a0ID"',
    '"Message\\tID"',
    '"Message\\\\ID"',
    '"Message ID\\u0000"',
    '"Message Time\\u200b"',
    '"Message\\u0020Time "',
    '"\\"Message ID\\""',
    '"MessageID"',
    '"Message\\ud83d\\ude00ID"',
  ]);
}

function ws(rng: Rng): string {
  if (rng.chance(0.7)) return '';
  let s = '';
  for (let n = rng.range(1, 3); n > 0; n--) s += rng.pick([' ', '\t', '\r', ' ']);
  return s;
}

/** A value where an id belongs: mostly a UUID string, sometimes anything else. */
function idValue(rng: Rng, id: string): string {
  const r = rng.next();
  if (r < 0.6) return JSON.stringify(id);
  if (r < 0.7) return JSON.stringify(id.toUpperCase());
  if (r < 0.8) return escapedLiteral(rng, id, rng.pick([0.1, 1]));
  return rng.pick([
    '12',
    'null',
    'true',
    '{}',
    `{"Message ID":${JSON.stringify(id)}}`,
    `[${JSON.stringify(id)}]`,
    `"{${id}}"`,
    `"${id.replaceAll('-', '')}"`,
    `"${id} "`,
    '""',
    `"${id.slice(0, 35)}\\u0067"`,
  ]);
}

function timeValue(rng: Rng, day: string): string {
  const hh = String(rng.int(24)).padStart(2, '0');
  const t = rng.pick([
    `${day}T${hh}:00:00Z`,
    `${day}T${hh}:30:00.5+02:00`,
    `${day}T${hh}:00:00`, // no offset: quarantined with its day
    `${day}T${hh}:00:00-01:00`,
    '2026-02-30T10:00:00Z',
    `${day}`,
  ]);
  const r = rng.next();
  if (r < 0.75) return JSON.stringify(t);
  if (r < 0.9) return escapedLiteral(rng, t, 0.2);
  return rng.pick(['null', '1700000000', `[${JSON.stringify(t)}]`]);
}

/** Text of Input or Response: sometimes quoting keys and ids, with escapes of every kind. */
function textValue(rng: Rng, otherId: string): string {
  const parts: string[] = [];
  for (let n = rng.range(0, 4); n > 0; n--) {
    parts.push(
      rng.pick([
        'plain words',
        `"Message ID":"${otherId}"`,
        `{"Message ID": "${otherId}", "Message Time": "2020-01-01T00:00:00Z"}`,
        'a \\ backslash',
        'tab\tand\nnewline',
        'é😀\u{10FFFF}',
        '\u2028\u2029',
        hostile ? '\\u0020' : 'x',
        hostile ? '"Message\\u0020ID"' : 'y',
      ]),
    );
  }
  const s = parts.join(' ');
  return !hostile || rng.chance(0.8) ? JSON.stringify(s) : escapedLiteral(rng, s, 0.3);
}

/** A value of an unknown field: nesting that may hide the named keys, deep or long keys. */
function extraValue(rng: Rng, otherId: string): string {
  const r = rng.next();
  if (r < 0.3) return JSON.stringify(rng.pick(['x', 'Message ID', '"', '\\', '}', '{', ':']));
  if (r < 0.5)
    return `{${spell(rng, 'Message ID')}:${JSON.stringify(otherId)},${spell(rng, 'Message Time')}:"2020-01-01T00:00:00Z"}`;
  if (r < 0.6) {
    const depth = rng.range(2, 90);
    return `${'['.repeat(depth)}${JSON.stringify(otherId)}${']'.repeat(depth)}`;
  }
  if (r < 0.7) return `[{"a":{"Message ID":${JSON.stringify(otherId)}}},"\\"}",{"b":"]"}]`;
  return rng.pick(['1e400', '-0', '123456789012345678901234567890', 'null', 'false', '[]', '{}']);
}

/**
 * One line: a record's fields in any order, with duplicates, near-miss keys, nested decoys and
 * extra fields; now and then bytes that are not JSON (invalid UTF-8 near a key, a cut, a BOM).
 */
export function adversarialLine(rng: Rng, day: string, ids: readonly string[]): LineCase {
  hostile = rng.chance(0.5);
  const id = rng.pick(ids);
  const other = rng.chance(0.5) ? rng.pick(ids) : uuid(rng);
  const fields: Array<[string, string]> = [];
  const values: Record<(typeof NAMED)[number], string> = {
    'Message ID': idValue(rng, id),
    'Thread ID': rng.chance(0.95) ? JSON.stringify(rng.pick(ids.slice(0, 5))) : idValue(rng, other),
    'User ID': JSON.stringify(ids[ids.length - 1]),
    'Message Time': timeValue(rng, day),
    Input: textValue(rng, other),
    Response: textValue(rng, other),
  };
  for (const k of NAMED) if (!rng.chance(0.03)) fields.push([spell(rng, k), values[k]]);
  const notes: string[] = [];
  for (let n = rng.range(0, 3); n > 0; n--) {
    const r = rng.next();
    if (r < 0.35) {
      // A second Message ID (or Time), in any spelling, anywhere: JSON.parse reads the last.
      const key = rng.chance(0.75) ? 'Message ID' : 'Message Time';
      fields.push([spell(rng, key), key === 'Message ID' ? idValue(rng, other) : timeValue(rng, day)]);
      notes.push(`duplicate ${key}`);
    } else if (r < 0.6) fields.push([nearMiss(rng), JSON.stringify(other)]);
    else if (r < 0.7) fields.push([JSON.stringify(`k${'é'.repeat(rng.range(1, 400))}`), '1']);
    else
      fields.push([
        JSON.stringify(rng.pick(['Model', 'meta', 'Latency Ms', '__proto__', 'x'])),
        extraValue(rng, other),
      ]);
  }
  // Shuffled: the named keys first, last or between the others.
  for (let i = fields.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [fields[i], fields[j]] = [fields[j] as [string, string], fields[i] as [string, string]];
  }
  let text = `${ws(rng)}{${ws(rng)}${fields.map(([k, v]) => `${k}${ws(rng)}:${ws(rng)}${v}`).join(`${ws(rng)},${ws(rng)}`)}${ws(rng)}}${ws(rng)}`;
  let bytes = Buffer.from(text);
  const r = rng.next();
  if (r < 0.03) {
    // Invalid UTF-8 inside or next to a key.
    const at = bytes.indexOf('Message') + rng.int(12);
    bytes = Buffer.concat([
      bytes.subarray(0, at),
      Buffer.from([rng.pick([0xff, 0xc3, 0x80, 0xed])]),
      bytes.subarray(at),
    ]);
    notes.push('invalid utf-8');
  } else if (r < 0.05) {
    bytes = bytes.subarray(0, rng.int(bytes.length));
    notes.push('cut');
  } else if (r < 0.06) {
    bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]);
    notes.push('bom');
  } else if (r < 0.07) {
    text = `[${text}]`;
    bytes = Buffer.from(text);
    notes.push('array');
  }
  return { bytes, note: notes.join(', ') };
}

/** The lower-case id a string names, as the parser reads it, or null. */
function idOf(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  const form = uuidForm(v);
  return form === 0 ? null : form === 2 ? v.toLowerCase() : v;
}

interface Reading {
  messageId: string | null;
  messageTime: string | null;
  userId: string | null;
  threadId: string | null;
}

/** JSON.parse's reading of a line: its own object's ids and time, or null when it is not a JSON object. */
export function oracle(bytes: Buffer): Reading | null {
  if (!isUtf8(bytes)) return null;
  let v: unknown;
  try {
    v = JSON.parse(bytes.toString('utf8'));
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return { messageId: null, messageTime: null, userId: null, threadId: null };
  const o = v as Record<string, unknown>;
  return {
    messageId: Object.hasOwn(o, 'Message ID') ? idOf(o['Message ID']) : null,
    userId: Object.hasOwn(o, 'User ID') ? idOf(o['User ID']) : null,
    threadId: Object.hasOwn(o, 'Thread ID') ? idOf(o['Thread ID']) : null,
    messageTime:
      Object.hasOwn(o, 'Message Time') && typeof o['Message Time'] === 'string' ? o['Message Time'] : null,
  };
}

export interface ReadingTally {
  lines: number;
  json: number;
  records: number;
  quickIds: number;
  quickUndecided: number;
}

export function newReadingTally(): ReadingTally {
  return { lines: 0, json: 0, records: 0, quickIds: 0, quickUndecided: 0 };
}

/**
 * Every byte-level reader of one line against JSON.parse; the first disagreement, or null.
 * `rng` cuts the line into pieces for the streaming scanner (an over-long line is read as it
 * streams past, in whatever pieces the network delivered).
 */
export function disagreement(c: LineCase, rng: Rng, tally: ReadingTally): string | null {
  const { bytes } = c;
  tally.lines++;
  const truth = oracle(bytes);
  const whole = lineFields(bytes);
  const s = new LineFieldScanner();
  for (let at = 0; at < bytes.length; ) {
    const n = 1 + rng.int(Math.max(1, Math.min(64, bytes.length - at)));
    s.feed(bytes.subarray(at, at + n));
    at += n;
  }
  const pieces = s.result();
  if (
    pieces.messageId !== whole.messageId ||
    pieces.messageTime !== whole.messageTime ||
    pieces.userId !== whole.userId ||
    pieces.threadId !== whole.threadId
  )
    return `scanner in pieces ${JSON.stringify(pieces)} vs whole ${JSON.stringify(whole)}`;
  const quick = quickMessageId(bytes);
  if (quick !== undefined) tally.quickIds++;
  if (truth === null) return null; // not JSON: no reading to agree with
  tally.json++;
  if (whole.messageId !== truth.messageId)
    return `scanner id ${whole.messageId} vs JSON.parse ${truth.messageId}`;
  if (whole.messageTime !== truth.messageTime)
    return `scanner time ${JSON.stringify(whole.messageTime)} vs JSON.parse ${JSON.stringify(truth.messageTime)}`;
  // The ids a reject keeps for `crs-sync forget` (rejected_records.user_id, thread_id).
  if (whole.userId !== truth.userId || whole.threadId !== truth.threadId)
    return `scanner user/thread ${whole.userId}/${whole.threadId} vs JSON.parse ${truth.userId}/${truth.threadId}`;
  const text = bytes.toString('utf8');
  const parsed = parseRecord(text, { hash: false, fromUtf8: true });
  if (parsed.ok) {
    tally.records++;
    if (parsed.record.messageId !== truth.messageId)
      return `parser id ${parsed.record.messageId} vs ${truth.messageId}`;
    if (quick === undefined) tally.quickUndecided++;
    else if (quick !== truth.messageId) return `quick id ${quick} vs JSON.parse ${truth.messageId}`;
  } else {
    // The router partitions a rejected line by whatever the quick id read (documented in
    // fast-path.ts), but when the line's own object has an id, it must be that one.
    if (quick !== undefined && truth.messageId !== null && quick !== truth.messageId)
      return `quick id ${quick} vs JSON.parse ${truth.messageId} (rejected line)`;
    const rej = textReject(1, parsed, text, bytes, dayOfRaw(text));
    if (rej.messageId !== truth.messageId)
      return `reject id ${rej.messageId} vs JSON.parse ${truth.messageId}`;
    if (rej.userId !== truth.userId || rej.threadId !== truth.threadId)
      return `reject user/thread ${rej.userId}/${rej.threadId} vs JSON.parse ${truth.userId}/${truth.threadId}`;
    const day = dayOfTimeValue(truth.messageTime);
    if (rej.day !== day) return `reject day ${rej.day} vs JSON.parse's time ${truth.messageTime} (${day})`;
  }
  return null;
}
