import type pg from 'pg';
import { clearSeen, copySeen } from '../../warehouse/load/delete-guard.ts';
import { COPY_HEADER, COPY_TRAILER } from './copy-binary.ts';

/**
 * The message ids a load saw, for the delete step (rows of a complete day the source no longer
 * holds), kept in the warehouse instead of the heap: a 10M-line day held as id strings was
 * ~700 MB. Ids are encoded as binary COPY tuples (load key, 16-byte uuid) into a chunk buffer,
 * and a full chunk is copied into the UNLOGGED `load_seen` on a connection of its own while the
 * load goes on; at most MAX_QUEUED chunks wait, so memory stays a few MB however large the day.
 *
 * Every attempt of a load reads its whole source again (lines an earlier attempt committed
 * included) and reports their ids again, so `reset` clears what an earlier attempt spilled.
 * An id may be reported twice (a batch retried); the anti-join does not mind.
 */

const CHUNK_IDS = 65_536;
const MAX_QUEUED = 2;

export class SeenSpill {
  private readonly key: Buffer;
  private readonly tupleBytes: number;
  private buf: Buffer;
  private off = 0;
  private readonly queued: Buffer[] = [];
  private writing: Promise<void> | null = null;
  private failure: unknown = null;
  /** Ids reported so far (duplicates included). */
  count = 0;

  private readonly pool: pg.Pool;
  readonly loadKey: string;
  private readonly chunkIds: number;

  constructor(pool: pg.Pool, loadKey: string, chunkIds = CHUNK_IDS) {
    this.pool = pool;
    this.loadKey = loadKey;
    this.chunkIds = chunkIds;
    this.key = Buffer.from(loadKey, 'utf8');
    // field count, then each field as length + bytes
    this.tupleBytes = 2 + 4 + this.key.length + 4 + 16;
    this.buf = Buffer.allocUnsafe(this.tupleBytes * chunkIds);
  }

  /** Forgets what an earlier attempt of this load spilled. */
  async reset(): Promise<void> {
    await clearSeen(this.pool, this.loadKey);
  }

  /** Stops spilling and removes what this load spilled (its attempt failed). */
  async discard(): Promise<void> {
    this.queued.length = 0;
    this.off = 0;
    while (this.writing) await this.writing;
    await this.reset();
  }

  /** Records one id (a canonical or upper-case uuid text, as the parser validated it). */
  add(id: string): void {
    const b = this.buf;
    let o = this.off;
    o = b.writeInt16BE(2, o);
    o = b.writeInt32BE(this.key.length, o);
    o += this.key.copy(b, o);
    o = b.writeInt32BE(16, o);
    for (let i = 0; i < 36; i += 2) {
      if (i === 8 || i === 13 || i === 18 || i === 23) i++;
      b[o++] = (hex(id.charCodeAt(i)) << 4) | hex(id.charCodeAt(i + 1));
    }
    this.off = o;
    this.count++;
    if (o + this.tupleBytes > b.length) {
      this.queued.push(b.subarray(0, o));
      this.buf = Buffer.allocUnsafe(this.tupleBytes * this.chunkIds);
      this.off = 0;
      this.pump();
    }
  }

  /** True when the loader should wait for `room` (or learn of a failed write) before going on. */
  get backlogged(): boolean {
    return this.queued.length > MAX_QUEUED || this.failure !== null;
  }

  /** Waits while too many chunks are queued. */
  async room(): Promise<void> {
    while (this.queued.length > MAX_QUEUED && this.writing) await this.writing;
    if (this.failure) throw this.failure;
  }

  /** Writes what is left; after it, `load_seen` holds every id reported. */
  async finish(): Promise<void> {
    if (this.off > 0) {
      this.queued.push(this.buf.subarray(0, this.off));
      this.buf = Buffer.allocUnsafe(0);
      this.off = 0;
    }
    this.pump();
    while (this.writing) await this.writing;
    if (this.failure) throw this.failure;
  }

  private pump(): void {
    if (this.writing || this.failure) return;
    const chunk = this.queued.shift();
    if (!chunk) return;
    this.writing = this.copy(chunk).then(
      () => {
        this.writing = null;
        this.pump();
      },
      (err) => {
        this.failure ??= err;
        this.queued.length = 0;
        this.writing = null;
      },
    );
  }

  private async copy(chunk: Buffer): Promise<void> {
    await copySeen(this.pool, (input) => {
      input.write(COPY_HEADER);
      input.write(chunk);
      input.end(COPY_TRAILER);
    });
  }
}

function hex(c: number): number {
  // '0'-'9', 'a'-'f', 'A'-'F'
  return c <= 57 ? c - 48 : (c | 32) - 87;
}
