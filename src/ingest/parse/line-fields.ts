import { uuidForm } from './uuid-form.ts';

/**
 * The two fields a quarantined line is known by, `Message ID` (its row is not deleted for its
 * absence, finalize.ts) and `Message Time` (the reject's `day`), read from the line's bytes as
 * they stream past, piece by piece, holding nothing of the line but the values read. The splitter
 * runs it only over a line longer than the limit, which it never holds whole: the export writes
 * `Input` and `Response` first, so both fields may lie far beyond the kept prefix. The id of every
 * other export or file reject is read by it too, from the line's bytes (one rule for
 * `rejected_records.message_id`); their day stays `dayOfRaw`'s (pending.ts), by the same rule.
 * `User ID` and `Thread ID` are read the same way as the id: an over-long line of an erased user
 * or thread is dropped by them (merge.ts), its kept prefix naming neither, and the quarantine keeps
 * them (`rejected_records.user_id`, `thread_id`) for `crs-sync forget` to find the reject by.
 *
 * How strict, and why:
 * - Only the keys of the line's own object count (depth 1): strings are followed with their
 *   escapes, so `"Message ID"` inside `Input`'s text or a nested object is never taken for it.
 * - A key counts by what it says, not how it is written: a key holding an escape (`"Message\u0020ID"`
 *   is `Message ID` to JSON.parse) is decoded as JSON.parse decodes it. Only a key of at most 72
 *   bytes can be one of the two (each of their characters written as a `\uXXXX` escape at most),
 *   so only those are kept to be decoded. JSON white space (space, tab, CR) may surround the colon.
 * - The id must be a string that decodes to a UUID in 8-4-4-4-12 hex (either case, read
 *   lower-case), as the parser wants it; the time a string of at most 512 bytes as written, read
 *   decoded. A duplicated key is read as JSON.parse reads it: the last one wins, and a last one
 *   that is not a UUID gives null. So on a line that is valid JSON the id and the time are
 *   JSON.parse's, or null; never another value (test/ingest/fuzz/line-reading.test.ts).
 * - The bytes are not validated as JSON. At the first one that cannot be where it is (a line not
 *   starting with `{`, a missing colon, a stray quote after a number), the scan stops and keeps
 *   what it read before: from there on it could no longer tell a key from text. After the object
 *   closes nothing more is read.
 */

const ID_KEY = Buffer.from('Message ID', 'latin1');
const TIME_KEY = Buffer.from('Message Time', 'latin1');
const USER_KEY = Buffer.from('User ID', 'latin1');
const THREAD_KEY = Buffer.from('Thread ID', 'latin1');
/** Bytes of a value kept: a UUID written wholly in `\uXXXX` escapes takes 216, a time more. */
const CAPTURE = 512;
/** Bytes of a key kept: `Message Time` (the longest key read) written wholly in `\uXXXX` escapes. */
const KEY_CAPTURE = 6 * TIME_KEY.length;

const QUOTE = 34;
const BACKSLASH = 92;

// The scanner's states (numbers: the project runs TypeScript by type stripping, without enums).
/** Before the line's `{` (white space, and a BOM on line 1). */
const START = 0;
/** After `{`: a key (or `}`). */
const FIRST_KEY = 1;
/** After `,`: a key. */
const KEY = 2;
const IN_KEY = 3;
const COLON = 4;
const VALUE = 5;
const IN_VALUE = 6;
/** A number or literal at depth 1. */
const SCALAR = 7;
/** After a value: `,` or `}`. */
const AFTER = 8;
/** Inside an object or array value (depth 2 and more). */
const NESTED = 9;
const DONE = 10;

// Which of the fields the key just read names.
const NONE = 0;
const ID = 1;
const TIME = 2;
const USER = 3;
const THREAD = 4;

function isSpace(c: number): boolean {
  return c === 32 || c === 9 || c === 13;
}

export interface LineFields {
  /** The line's `Message ID`, lower-case, or null when it cannot be read. */
  messageId: string | null;
  /** The line's `Message Time` as written, or null. */
  messageTime: string | null;
  /**
   * The line's `User ID` and `Thread ID`, read as its `Message ID` is: a reject is dropped by them
   * when the user or thread was erased, and kept with them (`crs-sync forget` finds it by them),
   * an over-long line's kept prefix often naming neither.
   */
  userId?: string | null;
  threadId?: string | null;
}

export class LineFieldScanner {
  private state = START as number;
  // Bytes seen before the line's `{` (a BOM is allowed only as the first three).
  private lead = 0;
  // Inside a string: the next byte is escaped.
  private escaped = false;
  // Inside a nested value: its depth below the line's object, and whether in a string there.
  private depth = 0;
  private nestedString = false;
  // The key being read: its bytes as written (the first KEY_CAPTURE), its length so far, and
  // whether it holds an escape (then it is decoded before it is compared).
  private readonly key = Buffer.alloc(KEY_CAPTURE);
  private keyLen = 0;
  private keyEscaped = false;
  private target = NONE as number;
  // The id's or the time's value as written: the first CAPTURE bytes, its length, any escape.
  private readonly value = Buffer.alloc(CAPTURE);
  private valueLen = 0;
  private valueEscaped = false;
  private id: string | null = null;
  private time: string | null = null;
  private user: string | null = null;
  private thread: string | null = null;
  // skipString's search positions in `piece`.
  private piece: Uint8Array | null = null;
  private nextQuote = -2;
  private nextEscape = -2;

  /** The next bytes of the line (without its line ending). */
  feed(b: Uint8Array): void {
    let i = 0;
    const n = b.length;
    while (i < n && this.state !== DONE) {
      if (this.state === IN_VALUE) i = this.target === NONE ? this.skipString(b, i) : this.readValue(b, i);
      else if (this.state === NESTED) i = this.nested(b, i);
      else this.structural(b[i++] as number);
    }
  }

  /** What the line said, as far as it was read. */
  result(): LineFields {
    return { messageId: this.id, messageTime: this.time, userId: this.user, threadId: this.thread };
  }

  /** One byte outside any string of a value, at depth 1 (or before the object). */
  private structural(c: number): void {
    switch (this.state) {
      case START: {
        const bom =
          (this.lead === 0 && c === 0xef) ||
          (this.lead === 1 && c === 0xbb) ||
          (this.lead === 2 && c === 0xbf);
        this.lead++;
        if (c === 123) this.state = FIRST_KEY;
        else if (!isSpace(c) && !bom) this.state = DONE;
        return;
      }
      case FIRST_KEY:
      case KEY:
        if (c === QUOTE) {
          this.state = IN_KEY;
          this.keyLen = 0;
          this.keyEscaped = false;
          this.escaped = false;
        } else if (!isSpace(c)) this.state = DONE; // `}` ends an empty object: nothing to read either
        return;
      case IN_KEY:
        if (this.escaped) this.escaped = false;
        else if (c === BACKSLASH) {
          this.escaped = true;
          this.keyEscaped = true;
        } else if (c === QUOTE) {
          this.target = this.keyTarget();
          // A key JSON.parse cannot decode: the line is not JSON, and nothing after it is read.
          this.state = this.target < 0 ? DONE : COLON;
          return;
        }
        if (this.keyLen < KEY_CAPTURE) this.key[this.keyLen] = c;
        this.keyLen++;
        return;
      case COLON:
        if (c === 58) this.state = VALUE;
        else if (!isSpace(c)) this.state = DONE;
        return;
      case VALUE:
        if (c === QUOTE) {
          this.state = IN_VALUE;
          this.escaped = false;
          this.valueLen = 0;
          this.valueEscaped = false;
        } else if (c === 123 || c === 91) {
          this.state = NESTED;
          this.depth = 1;
          this.nestedString = false;
          this.keyRead(null);
        } else if (c === 125 || c === 44 || c === 58 || c === 93) this.state = DONE;
        else if (!isSpace(c)) {
          this.state = SCALAR;
          this.keyRead(null);
        }
        return;
      case SCALAR:
      case AFTER:
        if (c === 44) this.state = KEY;
        else if (c === 125) this.state = DONE;
        else if (isSpace(c)) this.state = AFTER;
        else if (this.state === AFTER || c === QUOTE || c === 123 || c === 91) this.state = DONE;
        return;
    }
  }

  /**
   * The text of a value that is not read: to its closing quote, by indexOf (the bulk of a line
   * is such text). Returns the index after the last byte consumed. The next quote and backslash
   * of the piece are remembered, so that no byte is searched twice however many strings and
   * escapes the piece holds.
   */
  private skipString(b: Uint8Array, i: number): number {
    const n = b.length;
    if (this.piece !== b) {
      this.piece = b;
      this.nextQuote = -2;
      this.nextEscape = -2;
    }
    while (i < n) {
      if (this.escaped) {
        this.escaped = false;
        i++;
        continue;
      }
      // -1: none left in the piece; -2 or behind `i`: to be searched again.
      if (this.nextQuote !== -1 && this.nextQuote < i) this.nextQuote = b.indexOf(QUOTE, i);
      if (this.nextEscape !== -1 && this.nextEscape < i) this.nextEscape = b.indexOf(BACKSLASH, i);
      const q = this.nextQuote;
      const e = this.nextEscape;
      if (e !== -1 && (q === -1 || e < q)) {
        this.escaped = true;
        i = e + 1;
      } else if (q === -1) return n;
      else {
        this.state = AFTER;
        return q + 1;
      }
    }
    return i;
  }

  /**
   * Which of the two fields the key just read names (NONE: neither), or -1 when it holds an
   * escape JSON.parse refuses.
   */
  private keyTarget(): number {
    if (this.keyLen > KEY_CAPTURE) return NONE;
    if (!this.keyEscaped) {
      const k = this.key.subarray(0, this.keyLen);
      return k.equals(ID_KEY)
        ? ID
        : k.equals(TIME_KEY)
          ? TIME
          : k.equals(USER_KEY)
            ? USER
            : k.equals(THREAD_KEY)
              ? THREAD
              : NONE;
    }
    const k = decoded(this.key, this.keyLen);
    if (k === null) return -1;
    return k === 'Message ID'
      ? ID
      : k === 'Message Time'
        ? TIME
        : k === 'User ID'
          ? USER
          : k === 'Thread ID'
            ? THREAD
            : NONE;
  }

  /** The text of an id's or the time's value, captured while at most CAPTURE bytes. */
  private readValue(b: Uint8Array, i: number): number {
    const n = b.length;
    while (i < n) {
      const c = b[i++] as number;
      if (this.escaped) this.escaped = false;
      else if (c === BACKSLASH) {
        this.escaped = true;
        this.valueEscaped = true;
      } else if (c === QUOTE) {
        this.state = AFTER;
        if (this.valueLen > CAPTURE)
          this.keyRead(null); // longer than any UUID or time it could take
        else if (!this.valueEscaped) this.keyRead(this.value.toString('utf8', 0, this.valueLen));
        else {
          const v = decoded(this.value, this.valueLen);
          if (v === null)
            this.state = DONE; // not JSON from here on
          else this.keyRead(v);
        }
        return i;
      }
      if (this.valueLen < CAPTURE) this.value[this.valueLen] = c;
      this.valueLen++;
    }
    return i;
  }

  /** The value of the key just read: null when it was not a plain string. */
  private keyRead(v: string | null): void {
    if (this.target === TIME) this.time = v;
    else if (this.target !== NONE) {
      const form = v === null ? 0 : uuidForm(v);
      const id = v === null || form === 0 ? null : form === 2 ? v.toLowerCase() : v;
      if (this.target === ID) this.id = id;
      else if (this.target === USER) this.user = id;
      else this.thread = id;
    }
    this.target = NONE;
  }

  /** Bytes of a nested value from `i`; returns the index after the last byte consumed. */
  private nested(b: Uint8Array, i: number): number {
    const n = b.length;
    while (i < n) {
      const c = b[i++] as number;
      if (this.nestedString) {
        if (this.escaped) this.escaped = false;
        else if (c === BACKSLASH) this.escaped = true;
        else if (c === QUOTE) this.nestedString = false;
      } else if (c === QUOTE) {
        this.nestedString = true;
        this.escaped = false;
      } else if (c === 123 || c === 91) this.depth++;
      else if (c === 125 || c === 93) {
        if (--this.depth === 0) {
          this.state = AFTER;
          return i;
        }
      }
    }
    return i;
  }
}

/**
 * The JSON string whose bytes between the quotes are `bytes[0, len)`, decoded as JSON.parse
 * decodes it, or null when JSON.parse refuses it (a bad escape, a raw control character).
 */
function decoded(bytes: Buffer, len: number): string | null {
  try {
    const v: unknown = JSON.parse(`"${bytes.toString('utf8', 0, len)}"`);
    return typeof v === 'string' ? v : null;
  } catch {
    return null;
  }
}

/** The fields of a whole line held in one buffer (a reject that is not over-long). */
export function lineFields(bytes: Uint8Array): LineFields {
  const s = new LineFieldScanner();
  s.feed(bytes);
  return s.result();
}
