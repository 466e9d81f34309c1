import { uuidForm } from '../parse/uuid-form.ts';

/**
 * The fast path of a re-load: a line routed by the message id read straight from its bytes, and
 * parsed only if the warehouse lacks a row loaded from exactly these bytes (merge.ts decides).
 * `FastPathGate` turns it off while it does not pay (a first load) and probes again now and then.
 */

const ID_KEY = Buffer.from('"Message ID"');
const ESCAPE_00 = Buffer.from('\\u00');

/**
 * Characters of `Message ID` by their code: a key may write any of them as `\u00XX` (the hex in
 * either case) and still be `Message ID` to JSON.parse.
 */
const ID_KEY_CHARS = new Set(Array.from('Message ID', (c) => c.charCodeAt(0)));

function hexValue(c: number | undefined): number {
  if (c === undefined) return -1;
  if (c >= 48 && c <= 57) return c - 48;
  const lower = c | 0x20;
  return lower >= 97 && lower <= 102 ? lower - 87 : -1;
}

/**
 * Whether the line holds a `\u00XX` escape of a character of `Message ID`: then a key written
 * with escapes may be the message id (or a second one, which JSON.parse reads last), and the raw
 * key bytes cannot tell. A false alarm (such an escape in text) only sends the line the slow way.
 */
function mayHideIdKey(line: Buffer): boolean {
  for (let at = line.indexOf(ESCAPE_00); at >= 0; at = line.indexOf(ESCAPE_00, at + 1)) {
    const hi = hexValue(line[at + 4]);
    const lo = hexValue(line[at + 5]);
    if (hi >= 0 && lo >= 0 && ID_KEY_CHARS.has(hi * 16 + lo)) return true;
  }
  return false;
}

/**
 * The message id of an export line read straight from its text, for routing a line before it is
 * parsed (the fast path of unchanged re-loads). It is JSON.parse's id of the line or undefined,
 * never another id: the router partitions by it, and the known-lines skip notes it as routed
 * (two lines of one message in two partitions would lose the order "the last line wins").
 * - Only when the key occurs exactly once: in valid JSON an unescaped `"Message ID"` followed by
 *   a colon is a key, and a second one (a nested object in an unknown field) would make the
 *   top-level one ambiguous.
 * - Not when the line holds an escape that could spell the key otherwise (`"Message\u0020ID"`):
 *   JSON.parse decodes key names, and a second spelling is a second key whose value wins.
 * - A single key found inside a nested object while the line's own object has none: the parser
 *   rejects the line (`missing_field`), so no record is routed by the id read; the line is a
 *   reject in whichever partition, and a stored row is never matched (none was loaded from these
 *   bytes).
 * Anything unusual: undefined, and the line is parsed up front as usual.
 */
export function quickMessageId(line: Buffer): string | undefined {
  const at = line.indexOf(ID_KEY);
  if (at < 0 || line.indexOf(ID_KEY, at + ID_KEY.length) >= 0 || mayHideIdKey(line)) return undefined;
  let i = at + ID_KEY.length;
  while (isJsonSpace(line[i])) i++;
  if (line[i] !== 58) return undefined; // ':'
  i++;
  while (isJsonSpace(line[i])) i++;
  if (line[i] !== 34 || line[i + 37] !== 34) return undefined; // '"'
  const id = line.toString('latin1', i + 1, i + 37);
  const form = uuidForm(id);
  return form === 0 ? undefined : form === 2 ? id.toLowerCase() : id;
}

function isJsonSpace(c: number | undefined): boolean {
  return c === 32 || c === 9 || c === 13 || c === 10;
}

/**
 * Whether lines take the fast path. It pays off when most lines are already stored (a re-load);
 * while most are new (a first load) parsing up front overlaps better with the batches in flight.
 * Judged over every 4000 fast-path lines the merges report.
 */
export class FastPathGate {
  private enabled = true;
  /** false: never open (LoadRequest.fastPath). */
  private readonly allowed: boolean;
  private tries = 0;
  private hits = 0;
  private probeAt = 0;
  /** Lines after which a disabled fast path is tried again. */
  private readonly probeEvery: number;

  constructor(probeEvery: number, allowed = true) {
    this.probeEvery = probeEvery;
    this.allowed = allowed;
  }

  /** Whether line `lineNo` tries the fast path. */
  open(lineNo: number): boolean {
    if (!this.allowed) return false;
    if (this.tries >= 4000) {
      this.enabled = this.hits * 2 >= this.tries;
      this.tries = 0;
      this.hits = 0;
      this.probeAt = lineNo + this.probeEvery;
    } else if (!this.enabled && lineNo >= this.probeAt) {
      this.enabled = true; // try again now and then: a load may reach days already stored
    }
    return this.enabled;
  }

  /** What a committed batch found: its fast-path lines, and how many were unchanged unparsed. */
  record(tries: number, hits: number): void {
    this.tries += tries;
    this.hits += hits;
  }
}
