import { uuidForm } from './uuid-form.ts';

/**
 * The fast path of a re-load: a line routed by the message id read straight from its bytes, and
 * parsed only if the warehouse lacks a row loaded from exactly these bytes (merge.ts decides).
 * `FastPathGate` turns it off while it does not pay (a first load) and probes again now and then.
 */

const ID_KEY = Buffer.from('"Message ID"');

/**
 * The message id of an export line read straight from its text, for routing a line before it is
 * parsed (the fast path of unchanged re-loads). Only when the key occurs exactly once: in valid
 * JSON an unescaped `"Message ID"` followed by a colon is a key, and a second one (a nested
 * object in an unknown field) would make the top-level one ambiguous. Anything unusual: undefined,
 * and the line is parsed up front as usual.
 */
export function quickMessageId(line: Buffer): string | undefined {
  const at = line.indexOf(ID_KEY);
  if (at < 0 || line.indexOf(ID_KEY, at + ID_KEY.length) >= 0) return undefined;
  let i = at + ID_KEY.length;
  while (line[i] === 32) i++;
  if (line[i] !== 58) return undefined; // ':'
  i++;
  while (line[i] === 32) i++;
  if (line[i] !== 34 || line[i + 37] !== 34) return undefined; // '"'
  const id = line.toString('latin1', i + 1, i + 37);
  const form = uuidForm(id);
  return form === 0 ? undefined : form === 2 ? id.toLowerCase() : id;
}

/**
 * Whether lines take the fast path. It pays off when most lines are already stored (a re-load);
 * while most are new (a first load) parsing up front overlaps better with the batches in flight.
 * Judged over every 4000 fast-path lines the merges report.
 */
export class FastPathGate {
  private enabled = true;
  private tries = 0;
  private hits = 0;
  private probeAt = 0;
  /** Lines after which a disabled fast path is tried again. */
  private readonly probeEvery: number;

  constructor(probeEvery: number) {
    this.probeEvery = probeEvery;
  }

  /** Whether line `lineNo` tries the fast path. */
  open(lineNo: number): boolean {
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
