import { isUtf8 } from 'node:buffer';
import { LineFieldScanner } from './line-fields.ts';

export type LineProblem = 'line_too_long' | 'invalid_utf8' | 'nul_byte';

export interface SourceLine {
  /** 1-based physical line number in the source (blank lines count, but are not yielded). */
  lineNo: number;
  /** Bytes of the line in the source, without the line ending (and without the BOM on line 1). */
  byteLength: number;
  /** When set, the line must be quarantined, not parsed. */
  problem?: LineProblem;
  /** With a problem: the exact bytes (invalid_utf8, nul_byte), or the first maxPrefixBytes bytes (line_too_long). */
  rawBytes?: Buffer;
  /**
   * Without a problem: the line's bytes (valid UTF-8 without NUL; no CR/LF, no BOM on line 1), a
   * view into the source chunk (no copy). Valid only until the consumer asks for the next array
   * of lines: use it at once, never keep it. Not decoded here: a re-load can often skip a line
   * without ever turning it into a string.
   */
  bytes?: Buffer;
  /**
   * line_too_long only: the line's `Message ID` and `Message Time`, read from all its bytes as they
   * were skipped (line-fields.ts), wherever they lie; null when the line does not hold them.
   */
  messageId?: string | null;
  messageTime?: string | null;
  /** line_too_long only: its `User ID` and `Thread ID`, read the same way (line-fields.ts). */
  userId?: string | null;
  threadId?: string | null;
}

export interface SplitOptions {
  maxLineBytes: number;
  /** How much of an over-long line is kept for the quarantine. Default 64 KiB. */
  maxPrefixBytes?: number;
}

export interface SplitStats {
  bytesRead: number;
  linesSeen: number;
  blankLines: number;
  /** Most bytes ever held for one partial line (carry or over-long prefix): the splitter's own memory bound. */
  peakLineBytes?: number;
}

export const DEFAULT_MAX_PREFIX_BYTES = 64 * 1024;

const LF = 10;
const CR = 13;

// JSON's white space besides LF (the line end): space, tab, CR.
// `undefined` (an index past the end) is not white space.
function isJsonSpace(c: number | undefined): boolean {
  return c === 32 || c === 9 || c === CR;
}

function onlyJsonSpace(buf: Buffer, s: number, e: number): boolean {
  for (let i = s; i < e; i++) if (!isJsonSpace(buf[i])) return false;
  return true;
}

/**
 * Splits a byte stream into lines, yielding the complete lines of each input chunk as one array
 * (chunks that complete no line yield nothing). Blank lines (empty, or only JSON white space:
 * spaces, tabs, CRs; not longer than maxLineBytes) are counted but not yielded: they hold no
 * record, so they are not rejects.
 *
 * Fast path: the complete lines of a chunk are checked for UTF-8 validity and NUL bytes with one
 * `isUtf8` and one `indexOf(0)` over the whole span (LF cannot occur inside a multi-byte sequence,
 * so the span is valid exactly when every line in it is); only a dirty span is re-checked per line.
 *
 * A line longer than `maxLineBytes` is never held whole: at most `maxLineBytes + 1` bytes (+3 on
 * line 1, for a BOM) are carried before the splitter switches to skipping, keeping only the first
 * `maxPrefixBytes`. Its `Message ID` and `Message Time` are read as it streams past (a
 * LineFieldScanner, made only for such a line: ordinary lines never meet it), since the export
 * writes them after `Input` and `Response`, far beyond the prefix of a long line. Chunks are never
 * mutated, and partial lines are copied out of them.
 *
 * Long: the hot loop of every load, one pass per chunk with its state (carry, line number, the
 * over-long line's skip) in locals; split into functions, that state would move into an object
 * read and written per line (`node bench/splitter.ts` measures the splitter).
 */
export async function* splitLines(
  source: AsyncIterable<Uint8Array>,
  opts: SplitOptions,
  stats?: SplitStats,
): AsyncGenerator<SourceLine[]> {
  const maxLine = opts.maxLineBytes;
  const maxPrefix = opts.maxPrefixBytes ?? DEFAULT_MAX_PREFIX_BYTES;
  let lineNo = 0;

  // The partial line carried over from earlier chunks.
  let carry: Buffer[] = [];
  let carryLen = 0;
  // Skipping an over-long line: its prefix, its length so far, and its last byte (to drop a CR).
  let skipping = false;
  let prefix: Buffer[] = [];
  let prefixLen = 0;
  let skipLen = 0;
  let skipLast = -1;
  let prefixSlack = 0;
  // The over-long line's fields, read from every byte of it (the skipped ones too).
  let fields = null as LineFieldScanner | null;

  const st = stats ?? { bytesRead: 0, linesSeen: 0, blankLines: 0 };
  let peak = st.peakLineBytes ?? 0;
  const held = (n: number): void => {
    if (n > peak) {
      peak = n;
      st.peakLineBytes = n;
    }
  };

  const addPrefix = (b: Buffer): void => {
    const want = maxPrefix + prefixSlack;
    if (prefixLen >= want) return;
    const take = Math.min(b.length, want - prefixLen);
    // Copy: the prefix must not pin the (large) source chunk.
    prefix.push(Buffer.from(b.subarray(0, take)));
    prefixLen += take;
    held(prefixLen);
  };

  const startSkipping = (rest: Buffer): void => {
    skipping = true;
    // Line 1 keeps 3 bytes more, for a BOM that is removed at the end.
    prefixSlack = lineNo === 0 ? 3 : 0;
    prefix = [];
    prefixLen = 0;
    skipLen = carryLen + rest.length;
    fields = new LineFieldScanner();
    for (const c of carry) {
      addPrefix(c);
      fields.feed(c);
    }
    addPrefix(rest);
    fields.feed(rest);
    // The line's last byte so far: of `rest`, or of the carried part when `rest` is empty.
    const lastCarried = carry[carry.length - 1];
    skipLast =
      rest.length > 0 ? (rest[rest.length - 1] ?? -1) : (lastCarried?.[lastCarried.length - 1] ?? -1);
    carry = [];
    carryLen = 0;
  };

  // Line 1 may carry a 3-byte BOM that is not part of the line.
  const carryLimit = (): number => maxLine + 1 + (lineNo === 0 ? 3 : 0);

  const tooLongLine = (): SourceLine => {
    let byteLength = skipLen - (skipLast === CR ? 1 : 0);
    let raw = Buffer.concat(prefix, prefixLen);
    if (lineNo === 1 && raw.length >= 3 && raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf) {
      raw = raw.subarray(3);
      byteLength -= 3;
    }
    if (raw.length > maxPrefix) raw = raw.subarray(0, maxPrefix);
    const read = fields?.result() ?? { messageId: null, messageTime: null };
    skipping = false;
    prefix = [];
    prefixLen = 0;
    skipLen = 0;
    skipLast = -1;
    fields = null;
    return { lineNo, byteLength, problem: 'line_too_long', rawBytes: raw, ...read };
  };

  /** One complete line held in `buf[s, e)` (line ending excluded, CR still included). */
  const checkedLine = (buf: Buffer, s: number, e: number, clean: boolean, out: SourceLine[]): void => {
    if (e > s && buf[e - 1] === CR) e--;
    if (lineNo === 1 && e - s >= 3 && buf[s] === 0xef && buf[s + 1] === 0xbb && buf[s + 2] === 0xbf) s += 3;
    const len = e - s;
    if (len === 0) {
      st.blankLines++;
      return;
    }
    if (len > maxLine) {
      const whole = new LineFieldScanner();
      whole.feed(buf.subarray(s, e));
      out.push({
        lineNo,
        byteLength: len,
        problem: 'line_too_long',
        rawBytes: Buffer.from(buf.subarray(s, s + Math.min(len, maxPrefix))),
        ...whole.result(),
      });
      return;
    }
    // After the length check: an over-long line is line_too_long whatever it holds, as when it is
    // skipped across chunks without being looked at.
    if (isJsonSpace(buf[s]) && onlyJsonSpace(buf, s, e)) {
      st.blankLines++;
      return;
    }
    if (!clean) {
      const view = buf.subarray(s, e);
      if (!isUtf8(view)) {
        out.push({ lineNo, byteLength: len, problem: 'invalid_utf8', rawBytes: Buffer.from(view) });
        return;
      }
      if (view.indexOf(0) !== -1) {
        out.push({ lineNo, byteLength: len, problem: 'nul_byte', rawBytes: Buffer.from(view) });
        return;
      }
    }
    out.push({ lineNo, byteLength: len, bytes: buf.subarray(s, e) });
  };

  for await (const chunk of source) {
    const buf = Buffer.isBuffer(chunk)
      ? chunk
      : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    st.bytesRead += buf.length;
    if (buf.length === 0) continue;
    const out: SourceLine[] = [];
    let pos = 0;
    let nl = buf.indexOf(LF, 0);

    // Finish the line carried over from earlier chunks.
    if (skipping || carryLen > 0) {
      if (nl === -1) {
        if (skipping) {
          skipLen += buf.length;
          skipLast = buf[buf.length - 1] ?? -1;
          addPrefix(buf);
          fields?.feed(buf);
        } else if (carryLen + buf.length > carryLimit()) {
          startSkipping(buf);
        } else {
          carry.push(Buffer.from(buf));
          carryLen += buf.length;
          held(carryLen);
        }
        continue;
      }
      const limit = carryLimit();
      lineNo++;
      st.linesSeen++;
      if (skipping) {
        skipLen += nl;
        if (nl > 0) {
          skipLast = buf[nl - 1] ?? -1;
          addPrefix(buf.subarray(0, nl));
          fields?.feed(buf.subarray(0, nl));
        }
        out.push(tooLongLine());
      } else if (carryLen + nl > limit) {
        // Too long once joined: never concatenate it.
        startSkipping(buf.subarray(0, nl));
        out.push(tooLongLine());
      } else {
        carry.push(buf.subarray(0, nl));
        const whole = Buffer.concat(carry, carryLen + nl);
        carry = [];
        carryLen = 0;
        checkedLine(whole, 0, whole.length, false, out);
      }
      pos = nl + 1;
      nl = pos < buf.length ? buf.indexOf(LF, pos) : -1;
    }

    // The complete lines lying wholly inside this chunk: [pos, lastNl).
    if (nl !== -1) {
      const lastNl = buf.lastIndexOf(LF);
      const span = buf.subarray(pos, lastNl);
      const clean = isUtf8(span) && span.indexOf(0) === -1;
      while (nl !== -1) {
        lineNo++;
        st.linesSeen++;
        checkedLine(buf, pos, nl, clean, out);
        pos = nl + 1;
        nl = pos < buf.length ? buf.indexOf(LF, pos) : -1;
      }
    }

    // The start of a line that continues in the next chunk.
    if (pos < buf.length) {
      const rest = buf.subarray(pos);
      if (rest.length > carryLimit()) startSkipping(rest);
      else {
        // Copied: a small tail must not pin the whole chunk, and the source may reuse its buffer.
        carry.push(Buffer.from(rest));
        carryLen = rest.length;
        held(carryLen);
      }
    }
    if (out.length > 0) yield out;
  }

  // The final line without a trailing LF.
  if (skipping || carryLen > 0) {
    lineNo++;
    st.linesSeen++;
    const out: SourceLine[] = [];
    if (skipping) out.push(tooLongLine());
    else {
      const whole = Buffer.concat(carry, carryLen);
      carry = [];
      carryLen = 0;
      checkedLine(whole, 0, whole.length, false, out);
    }
    if (out.length > 0) yield out;
  }
}
