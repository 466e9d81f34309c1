import type pg from 'pg';
import { KNOWN_LINES_CEILING } from '../../config.ts';
import { readKnownLineText } from '../../warehouse/load/checkpoints.ts';

/**
 * The lines of the open day the warehouse already holds, by content: the sha1 of each live row's
 * source line (`line_hash`) with the last 32 bits of its message id. An intraday pull reads the
 * day's export from its first line every time (decision 0014: the export repeats no prefix), so
 * at an hourly pull most lines are ones an earlier pull loaded. Without this table each of them
 * went through the fast path: copied into its batch, its id sent to the server in a key lookup,
 * the stored row read back and compared (merge.ts `decide`). With it, a line whose sha1 is here
 * is that stored row's line byte for byte, so it is unchanged: counted as read and unchanged with
 * its key partition's next checkpoint, and taken no further (router.ts). Decision 0017.
 *
 * Read once per attempt of a pull, before its first line (`readKnownLines`), so it is the day as
 * the pull found it. What the pull itself writes is not in it; a key an earlier line of the same
 * pull wrote must not be skipped (the later line wins): `route` notes every key the pull sends to
 * its merge.
 */

/**
 * By default (CRS_KNOWN_LINES_MAX), a day with more live rows than this is pulled without the
 * table: it holds ~33 bytes a row (~66 MB here), ~100 while it is read.
 */
export const KNOWN_LINES_MAX = 2_000_000;

const ENTRY_BYTES = 24;
const ENTRY_WORDS = ENTRY_BYTES / 4;
/** Bits of the filter of keys routed (2^20: ~0.4 % false hits at 4,000 keys, and a false hit only costs the lookup). */
const ROUTED_BITS = 20;

export class KnownLines {
  /** Entries of 6 words: the sha1 as 5 little-endian words, then the id's last 32 bits. */
  private readonly entries: Uint32Array;
  /** Open addressing, linear probing: entry index + 1, 0 for empty. */
  private readonly slots: Uint32Array;
  private readonly mask: number;
  /** A bit per key (by its id's last 20 bits) this pull routed to its merge: those are not skipped. */
  private readonly routedBits = new Uint8Array(1 << (ROUTED_BITS - 3));
  readonly size: number;
  /** Lines skipped so far (this attempt). */
  skipped = 0;

  /** `rows`: `size` entries of 24 bytes (the line's sha1, then the id's last 32 bits: `readKnownLineText`). */
  constructor(rows: Buffer) {
    this.size = Math.floor(rows.length / ENTRY_BYTES);
    this.entries = new Uint32Array(this.size * ENTRY_WORDS);
    for (let i = 0; i < this.size; i++) {
      const at = i * ENTRY_BYTES;
      for (let w = 0; w < 5; w++) this.entries[i * ENTRY_WORDS + w] = rows.readUInt32LE(at + 4 * w);
      this.entries[i * ENTRY_WORDS + 5] = rows.readUInt32BE(at + 20);
    }
    let cap = 1024;
    while (cap < this.size * 2) cap *= 2;
    this.slots = new Uint32Array(cap);
    this.mask = cap - 1;
    for (let i = 0; i < this.size; i++) {
      let s = (this.entries[i * ENTRY_WORDS] as number) & this.mask;
      while (this.slots[s] !== 0) s = (s + 1) & this.mask;
      this.slots[s] = i + 1;
    }
  }

  /**
   * The last 32 bits of the id of the live row whose line has this sha1, or -1: not held, or its
   * key was routed to the merge by this pull (an earlier line may have changed the stored row).
   */
  find(sha1: Buffer): number {
    const w0 = sha1.readUInt32LE(0);
    const e = this.entries;
    for (let s = w0 & this.mask; ; s = (s + 1) & this.mask) {
      const slot = this.slots[s] as number;
      if (slot === 0) return -1;
      const at = (slot - 1) * ENTRY_WORDS;
      if (
        e[at] === w0 &&
        e[at + 1] === sha1.readUInt32LE(4) &&
        e[at + 2] === sha1.readUInt32LE(8) &&
        e[at + 3] === sha1.readUInt32LE(12) &&
        e[at + 4] === sha1.readUInt32LE(16)
      ) {
        const tail = e[at + 5] as number;
        return this.wasRouted(tail) ? -1 : tail;
      }
    }
  }

  /** A key this pull routes to its merge: a line of it seen later is never skipped. */
  route(messageId: string): void {
    const bit = Number.parseInt(messageId.slice(-8), 16) & ((1 << ROUTED_BITS) - 1);
    this.routedBits[bit >>> 3] = (this.routedBits[bit >>> 3] as number) | (1 << (bit & 7));
  }

  private wasRouted(tail: number): boolean {
    const bit = tail & ((1 << ROUTED_BITS) - 1);
    return ((this.routedBits[bit >>> 3] as number) & (1 << (bit & 7))) !== 0;
  }
}

/**
 * The open day's live lines as the warehouse holds them, or null: none yet (the day's first
 * pull, where the table would only cost), or more than `max` (bounded memory: the key lookups
 * instead, as before).
 */
export async function readKnownLines(
  client: pg.ClientBase,
  day: string,
  max = KNOWN_LINES_MAX,
): Promise<KnownLines | null> {
  // One text of 48 characters a row: past KNOWN_LINES_CEILING rows it would not fit in one string
  // (CRS_KNOWN_LINES_MAX is refused above it; a caller's own figure is held to it too).
  const limit = Math.min(max, KNOWN_LINES_CEILING);
  const row = await readKnownLineText(client, day, limit + 1);
  if (!row?.t || row.n > limit) return null;
  return new KnownLines(entriesOf(row.t, row.n));
}

/** `n` rows of 48 hex digits as 24-byte entries; a row that is not hex (not the loader's) is left out. */
function entriesOf(text: string, n: number): Buffer {
  const all = Buffer.from(text, 'hex');
  if (all.length === n * ENTRY_BYTES) return all;
  // Decoding stops at the first digit that is not hex: row by row then.
  const out: Buffer[] = [];
  const digits = 2 * ENTRY_BYTES;
  for (let i = 0; i < n; i++) {
    const one = text.slice(i * digits, (i + 1) * digits);
    if (/^[0-9a-f]+$/i.test(one) && one.length === digits) out.push(Buffer.from(one, 'hex'));
  }
  return Buffer.concat(out);
}
