import { createHash } from 'node:crypto';
import { dayOfTimeText } from '../../common/iso-time.ts';
import type { DriftNote } from '../../common/schema-drift.ts';
import { type LineFields, lineFields } from '../parse/line-fields.ts';
import type { LineProblem, SourceLine } from '../parse/line-splitter.ts';
import { recordHash } from '../parse/record-hash.ts';
import {
  type ExportContract,
  type ExportRecord,
  parseRecord,
  type RejectCode,
  rejectCodeForLineProblem,
} from '../parse/record-parser.ts';
import { uuidForm } from '../parse/uuid-form.ts';
import type { ByteSink } from './copy-binary.ts';
import { putMessageTuple } from './copy-binary.ts';

/**
 * A line on its way to the warehouse, between the partition that batches it and the merge that
 * writes it: a row in one of three states, or a reject. The one path from a line's text to its
 * encoded tuple (`encodeText`, `encodeRecord`) and the builders of every reject live here.
 */

/** What the merge decides on; the rest of a parsed record lives only in its encoded tuple. */
export type RowKey = Pick<ExportRecord, 'messageId' | 'threadId' | 'userId' | 'messageDate' | 'recordHash'>;

interface RowBase {
  lineNo: number;
  /** sha1 hex of the line's bytes. */
  lineHash: string;
}

/**
 * Parsed and encoded: its tuple is at `at`..`end` of the batch's sink. The key fields are on the
 * row itself rather than in an object of their own: a row lives until its batch commits, and one
 * object fewer per row is less for the garbage collector to promote.
 */
export interface EncodedRow extends RowBase, RowKey {
  kind: 'encoded';
  at: number;
  end: number;
}

/**
 * The fast path of a re-load: only the line's bytes (at `rawAt`..`rawEnd` of the batch's sink) and
 * the message id read from them; parsed by the merge only if the warehouse does not hold a row
 * loaded from exactly these bytes.
 */
export interface RawRow extends RowBase {
  kind: 'raw';
  quickId: string;
  rawAt: number;
  rawEnd: number;
}

/**
 * A line of a resumed load that an earlier attempt committed, parsed to be checked against the
 * warehouse: its text is kept, and encoded only if it must be merged after all.
 */
export interface CheckedRow extends RowBase, RowKey {
  kind: 'checked';
  text: string;
}

export type PendingRow = EncodedRow | RawRow | CheckedRow;

/** The schema drift of one line of a batch (record-parser.ts `lastDrift`), with the line's day. */
export interface LineDrift {
  day: string | null;
  notes: DriftNote[];
}

export interface PendingReject {
  lineNo: number;
  code: string;
  detail: string;
  raw: string;
  rawBytes: Buffer | null;
  rawLength: number;
  day: string | null;
  /** The line's `Message ID` where it can be read (line-fields.ts): its row is not deleted for its absence. */
  messageId: string | null;
  /**
   * The line's `User ID` and `Thread ID` where they can be read, as its `Message ID` is (an
   * over-long line's from the whole line: its kept prefix may not hold them). The load drops the
   * line when either was erased (merge.ts), and the quarantine keeps them (`user_id`,
   * `thread_id`): `crs-sync forget` finds the reject by them.
   */
  userId: string | null;
  threadId: string | null;
  /**
   * What makes it the same line for the quarantine, with its source and day (`rejectDigest`):
   * a line read again by a later load of its day is the same reject, counted, not a new one.
   */
  digest: Buffer;
}

/**
 * The quarantine's identity of a line, with its source and day (`rejected_records.line_digest`):
 * the SHA-256 of the line's exact bytes. An over-long line is never held whole, so it is known by
 * what is kept of it: the SHA-256 of its prefix, a NUL byte, its whole length in decimal digits,
 * a NUL byte and its message id (lower-case, as read from the whole line; nothing when it has none).
 * Two over-long lines of one day that agree in all of those are taken for the same line. SHA-256
 * rather than the sha1 the loader keeps of each line: PostgreSQL has it built in, so the migration
 * that gave the existing rows theirs computed the same digest in SQL.
 */
export function rejectDigest(
  bytes: Uint8Array,
  overLong?: { length: number; messageId: string | null },
): Buffer {
  const h = createHash('sha256').update(bytes);
  if (overLong) h.update(`\u0000${overLong.length}\u0000${overLong.messageId ?? ''}`);
  return h.digest();
}

/** The message id of any row: parsed, or read from its bytes. */
export function rowId(row: PendingRow): string {
  return row.kind === 'raw' ? row.quickId : row.messageId;
}

/** Appends the tuple of a parsed record to `sink` (its hash is taken as it is encoded). */
export function encodeRecord(
  sink: ByteSink,
  rec: ExportRecord,
  lineNo: number,
  loadId: string,
  lineHash: string,
): EncodedRow {
  const at = putMessageTuple(sink, rec, lineNo, loadId, lineHash);
  return {
    kind: 'encoded',
    lineNo,
    lineHash,
    messageId: rec.messageId,
    threadId: rec.threadId,
    userId: rec.userId,
    messageDate: rec.messageDate,
    recordHash: rec.recordHash,
    at,
    end: sink.len,
  };
}

/**
 * A parsed line of a resumed load, to be checked against the warehouse: hashed from its texts
 * (no tuple is encoded unless it must be merged after all), its text kept for that.
 */
export function checkedRow(rec: ExportRecord, lineNo: number, lineHash: string, text: string): CheckedRow {
  return {
    kind: 'checked',
    lineNo,
    lineHash,
    messageId: rec.messageId,
    threadId: rec.threadId,
    userId: rec.userId,
    messageDate: rec.messageDate,
    recordHash: recordHash(
      rec.messageId,
      rec.threadId,
      rec.userId,
      rec.messageTime,
      rec.input,
      rec.response,
      rec.extra,
    ),
    text,
  };
}

export type EncodeResult = { ok: true; row: EncodedRow } | { ok: false; code: RejectCode; detail: string };

/** A line's text (decoded from its bytes) parsed and encoded into `sink`, or why it is not a record. */
export function encodeText(
  text: string,
  sink: ByteSink,
  lineNo: number,
  loadId: string,
  lineHash: string,
  contract?: ExportContract,
): EncodeResult {
  // Hashed as it is encoded (copy-binary.ts), not by the parser; every text here was decoded from
  // a line's bytes (valid UTF-8, so well-formed: the parser need not scan it for that).
  const parsed = parseRecord(text, { hash: false, fromUtf8: true, ...(contract ? { contract } : {}) });
  if (!parsed.ok) return parsed;
  return { ok: true, row: encodeRecord(sink, parsed.record, lineNo, loadId, lineHash) };
}

/** The reject of a line whose text (decoded from `bytes`) is not a record. */
export function textReject(
  lineNo: number,
  problem: { code: string; detail: string },
  text: string,
  bytes: Uint8Array,
  day: string | null,
): PendingReject {
  return {
    lineNo,
    code: problem.code,
    detail: problem.detail,
    raw: text,
    rawBytes: null,
    rawLength: bytes.length,
    day,
    ...idsOf(fieldsOfText(text, bytes)),
    digest: rejectDigest(bytes),
  };
}

/**
 * The reject of a line the splitter could not hand over as text (its exact bytes are kept, or of
 * an over-long line a prefix). Its id and, without an `exportDay`, its day are read from the whole
 * line: an over-long line's by the splitter as it skipped it, the others' from their bytes here.
 */
export function lineReject(
  line: SourceLine,
  problem: LineProblem,
  maxLineBytes: number,
  exportDay: string | null,
): PendingReject {
  const bytes = line.rawBytes ?? Buffer.alloc(0);
  const read: LineFields =
    problem === 'line_too_long'
      ? {
          messageId: line.messageId ?? null,
          messageTime: line.messageTime ?? null,
          userId: line.userId ?? null,
          threadId: line.threadId ?? null,
        }
      : lineFields(bytes);
  return {
    lineNo: line.lineNo,
    code: rejectCodeForLineProblem(problem),
    detail:
      problem === 'line_too_long'
        ? `line of ${line.byteLength} bytes exceeds the limit of ${maxLineBytes} bytes (first ${bytes.length} bytes kept)`
        : problem === 'invalid_utf8'
          ? 'line is not valid UTF-8 (exact bytes kept in raw_bytes)'
          : 'line contains a NUL byte, which PostgreSQL text cannot hold (exact bytes kept in raw_bytes)',
    raw: bytes.toString('utf8').replaceAll('\u0000', '\\u0000'),
    rawBytes: bytes,
    rawLength: line.byteLength,
    day: exportDay ?? dayOfTimeValue(read.messageTime),
    ...idsOf(read),
    digest: rejectDigest(
      bytes,
      problem === 'line_too_long' ? { length: line.byteLength, messageId: read.messageId } : undefined,
    ),
  };
}

/** The ids a reject keeps of what was read of its line (none: nothing could be read). */
function idsOf(read: LineFields | null): Pick<PendingReject, 'messageId' | 'userId' | 'threadId'> {
  return {
    messageId: read?.messageId ?? null,
    userId: read?.userId ?? null,
    threadId: read?.threadId ?? null,
  };
}

/**
 * The day of a rejected line's text, best effort, for the quarantine's `day` column: a real
 * calendar date or null, never the raw text (PostgreSQL refuses 2026-02-30 as a date, which
 * would fail the batch).
 */
export function dayOfRaw(text: string): string | null {
  const read = fieldsOfText(text, null);
  if (read !== null) return dayOfTimeValue(read.messageTime);
  const m = /"Message Time"\s*:\s*"(\d{4}-\d{2}-\d{2}[^"\\]{0,64})"/.exec(text);
  return m?.[1] === undefined ? null : dayOfTimeText(m[1]);
}

// The last text `fieldsOfText` read: a reject asks for its day and its id one after the other.
let lastText: string | null = null;
let lastFields: LineFields | null = null;

/**
 * A rejected line's `Message ID`, `Message Time`, `User ID` and `Thread ID` as JSON.parse reads them (the line's own
 * object, escapes decoded, the last of duplicated keys), when the text is JSON: the parser
 * already judged the line by that reading, and the quarantine must name the record the parser
 * saw (its row is not deleted for its absence). Text that is not JSON: by the byte scanner from
 * `bytes` (line-fields.ts), or null without them. Rejects only: not on the path of a loaded line.
 */
function fieldsOfText(text: string, bytes: Uint8Array | null): LineFields | null {
  if (text !== lastText) {
    lastText = text;
    lastFields = parsedFields(text);
  }
  return lastFields ?? (bytes === null ? null : lineFields(bytes));
}

function parsedFields(text: string): LineFields | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return { messageId: null, messageTime: null, userId: null, threadId: null };
  const field = (k: string): unknown => (Object.hasOwn(v, k) ? (v as Record<string, unknown>)[k] : undefined);
  const time = field('Message Time');
  return {
    messageId: uuidOf(field('Message ID')),
    messageTime: typeof time === 'string' ? time : null,
    userId: uuidOf(field('User ID')),
    threadId: uuidOf(field('Thread ID')),
  };
}

/** A value that is a UUID string, lower-case (as line-fields.ts reads one), or null. */
function uuidOf(id: unknown): string | null {
  const form = typeof id === 'string' ? uuidForm(id) : 0;
  return typeof id !== 'string' || form === 0 ? null : form === 2 ? id.toLowerCase() : id;
}

/** The day of a `Message Time` value read on its own (line-fields.ts), by the rule of `dayOfRaw`. */
export function dayOfTimeValue(value: string | null): string | null {
  return value !== null && /^\d{4}-\d{2}-\d{2}[^"\\]{0,64}$/.test(value) ? dayOfTimeText(value) : null;
}
