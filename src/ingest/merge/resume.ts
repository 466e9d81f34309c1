import { createHash, type Hash, hash } from 'node:crypto';
import type pg from 'pg';
import { CrsError } from '../../errors.ts';
import { lookupCommittedRows } from '../../warehouse/load/checkpoints.ts';
import { Suppression } from '../../warehouse/privacy/suppression.ts';
import type { SourceLine } from '../parse/line-splitter.ts';
import type { Partition } from './partition.ts';

/**
 * What lets a load stop anywhere and go on, besides the checkpoints it resumes from
 * (src/warehouse/load/checkpoints.ts `openCheckpoints`): the check of the lines it skips because
 * an earlier attempt committed them, and the digest that a stream reopened after a cut must
 * repeat.
 */

/**
 * A resumed load skips the lines its checkpoint covers, but the source may have changed since
 * (a late record inserted early in a day's export shifts every later line). So skipped records
 * are looked up, a batch at a time: one the warehouse does not hold as this line says (absent,
 * marked deleted, another version not written by a later line of this load) is merged after all.
 * The partition must be idle (no batch in flight). Returns how many were.
 */
export async function verifySkipped(p: Partition, loadId: string): Promise<number> {
  const rows = p.verify;
  p.verify = [];
  const found = await lookupCommittedRows(
    p.client,
    rows.map((r) => r.messageId),
  );
  const cur = new Map(found.map((f) => [f.id, f]));
  let remerged = 0;
  let suppression: Suppression | undefined;
  for (const row of rows) {
    const c = cur.get(row.messageId);
    const held = c !== undefined && !c.d && (c.h === row.recordHash || (c.l === loadId && c.s >= row.lineNo));
    if (held) continue;
    // A record of an erased user or thread (`crs-sync forget`) is absent because the earlier
    // attempt dropped it (and counted it suppressed) or the erasure removed what it wrote: merged
    // again it would be counted a second time and written nowhere.
    suppression ??= await suppressionOf(p.client);
    if (suppression.drops(row.userId, row.threadId)) continue;
    p.readd(row);
    remerged++;
  }
  return remerged;
}

// Per connection, as the merge keeps it: read again only when an erasure was added.
const suppressions = new WeakMap<pg.ClientBase, Suppression>();

/**
 * The suppression list as it is now, without the writers' lock: a record found erased here stays
 * erased (the list only grows), and one erased after this is dropped by its batch, which reads
 * the list again under the lock (merge.ts).
 */
async function suppressionOf(client: pg.ClientBase): Promise<Suppression> {
  const s = await Suppression.read(client, suppressions.get(client), { lock: false });
  suppressions.set(client, s);
  return s;
}

/**
 * A digest of the lines taken so far, in order. A stream reopened after a cut must repeat them
 * exactly, or it is another version of the source (a late record inserted early in a day's
 * export shifts every later line) and skipping its first lines by count would lose or double
 * records: then the attempt fails retryably, and the next one resumes from the committed
 * checkpoint, where skipped lines are checked against the warehouse (verifySkipped). It is
 * kept over the lines' own hashes, which the merge needs anyway: hashing the bytes a second
 * time cost ~2 µs per 2 KB line on the loader's busiest thread.
 */
export class LineDigest {
  private readonly taken = createHash('sha1');

  /** Adds a line taken into the load; returns its sha1 (20 bytes), or null for a line with a problem. */
  take(line: SourceLine): Buffer | null {
    return digestLine(this.taken, line);
  }

  /** A check that a reopened stream's first `skipUpTo` lines are the ones taken (none: null). */
  reread(skipUpTo: number): PrefixCheck | null {
    return skipUpTo > 0 ? new PrefixCheck(skipUpTo, this.taken) : null;
  }
}

export class PrefixCheck {
  private readonly prefix = createHash('sha1');
  private readonly skipUpTo: number;
  private readonly taken: Hash;
  checked = false;

  constructor(skipUpTo: number, taken: Hash) {
    this.skipUpTo = skipUpTo;
    this.taken = taken;
  }

  add(line: SourceLine): void {
    digestLine(this.prefix, line);
  }

  /** Throws SOURCE_CHANGED unless the lines added repeat the lines taken, as seen at line `atLine`. */
  check(atLine: number): void {
    this.checked = true;
    if (this.prefix.digest('hex') !== this.taken.copy().digest('hex')) {
      throw new CrsError(
        'SOURCE_CHANGED',
        `the source changed while it was read: reopened after a cut, its lines 1-${this.skipUpTo} differ from the first read (seen at line ${atLine}); the load resumes from its committed checkpoint`,
        { retryable: true, details: { skipUpTo: this.skipUpTo, atLine } },
      );
    }
  }
}

function digestLine(h: Hash, line: SourceLine): Buffer | null {
  if (line.bytes) {
    // Binary: a line known by content (known-lines.ts) is skipped without ever being hex.
    const lineHash = hash('sha1', line.bytes, 'buffer');
    h.update(lineHash);
    return lineHash;
  }
  h.update(line.rawBytes ?? Buffer.alloc(0)).update(`\u0000${line.byteLength}\n`);
  return null;
}
