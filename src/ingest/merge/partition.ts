import type pg from 'pg';
import type { DriftNote } from '../../common/schema-drift.ts';
import { CrsError, errorMessage } from '../../errors.ts';
import type { Checkpoints } from '../../warehouse/load/checkpoints.ts';
import { ByteSink } from './copy-binary.ts';
import type { CheckedRow, LineDrift, PendingReject, PendingRow } from './pending.ts';

/**
 * One key partition of a load and the batch it is filling. Lines are routed to a partition by
 * message id (`partOf`); each partition owns one connection and merges its batches strictly in
 * line order, so the later line of a key always wins. A batch closes at `limit` lines or about
 * 2 MiB of tuples and rejected bytes; its sink is then handed to the merge and the spare sink
 * (the one of the batch before, done by then) takes the next batch's tuples.
 */

// A batch is sent when it holds batchSize lines or its sink this many bytes, whichever comes first,
// so that a sink keeps its initial size (unless one line alone is larger; a sink that grew for
// such a line, up to the 16 MiB limit, is not kept at that size).
const SINK_BYTES = 1 << 21;
const SINK_FLUSH_BYTES = SINK_BYTES - (1 << 16);
const SINK_KEEP_BYTES = 1 << 23;
// A known line costs its batch only a count, so it fills a batch at this fraction of a line: a
// checkpoint every few thousand of them, not a transaction per `batchSize` lines of nothing.
const KNOWN_PER_LINE = 8;

export function partOf(messageId: string, parts: number): number {
  // The last 8 hex digits are random in v4 and v7 UUIDs alike (v7 starts with a timestamp).
  return Number.parseInt(messageId.slice(-8), 16) % parts;
}

/** A closed batch: its rows and rejects, the sink holding their tuples and bytes. */
export interface Batch {
  rows: PendingRow[];
  rejects: PendingReject[];
  sink: ByteSink;
  /** Schema drift of the batch's lines, by line number (a line noted twice counts once). */
  drift: Map<number, LineDrift>;
  /** Lines known by content (known-lines.ts): read and unchanged, counted with the checkpoint. */
  known: number;
}

export class Partition {
  readonly index: number;
  readonly client: pg.PoolClient;
  /** Lines of the source up to which this partition is committed. */
  committed: number;
  /** The merge of the batch sent last, while it runs. */
  inflight: Promise<void> | null = null;
  /** Records of lines an earlier attempt committed, waiting to be checked against the warehouse. */
  verify: CheckedRow[] = [];
  /** The next batch skips the lookup of its keys (merge.ts `skipLookup`): the last one found none. */
  skipLookup = false;
  /** A batch that skipped the lookup met a stored key: this load looks every batch up. */
  lookupAlways = false;
  /** Tuples (and fast-path bytes) of the batch being filled. */
  sink = new ByteSink(SINK_BYTES);
  private rows: PendingRow[] = [];
  private rejects: PendingReject[] = [];
  private drift = new Map<number, LineDrift>();
  private known = 0;
  /** Bytes the batch's rejects hold outside the sink (their raw text), counted toward its bound. */
  private rejectBytes = 0;
  private spare = new ByteSink(SINK_BYTES);
  /** Lines of the batch being filled at which it is sent. */
  private limit: number;

  constructor(index: number, client: pg.PoolClient, committed: number, firstLimit: number) {
    this.index = index;
    this.client = client;
    this.committed = committed;
    this.limit = firstLimit;
  }

  /** A fast-path line, kept as bytes in the sink; whether the batch is full. */
  addRaw(lineNo: number, lineHash: string, quickId: string, bytes: Buffer): boolean {
    const rawAt = this.sink.put(bytes);
    this.rows.push({ kind: 'raw', lineNo, lineHash, quickId, rawAt, rawEnd: this.sink.len });
    // Rejected bytes are not counted here (as they always were): the bound is the sink's.
    return this.rows.length + this.rejects.length >= this.limit || this.sink.len >= SINK_FLUSH_BYTES;
  }

  /** A line known by content, counted and not kept (known-lines.ts); whether the batch is full. */
  addKnown(): boolean {
    this.known++;
    return this.full();
  }

  /** A row (encoded into this partition's sink, or re-checked); whether the batch is full. */
  addRow(row: PendingRow): boolean {
    this.rows.push(row);
    return this.full();
  }

  /** A re-checked line to merge after all; the next line added tells whether the batch is full. */
  readd(row: CheckedRow): void {
    this.rows.push(row);
  }

  /** The schema drift of a line of the batch being filled (copied: the parser reuses its list). */
  noteDrift(lineNo: number, day: string | null, notes: readonly DriftNote[]): void {
    this.drift.set(lineNo, { day, notes: notes.slice() });
  }

  /** A reject; whether the batch is full. */
  addReject(rej: PendingReject): boolean {
    this.rejects.push(rej);
    // Held outside the sink: counted toward the batch's bound, or a day of huge rejected lines
    // would grow one batch without limit (a text's length in UTF-16 units approximates its bytes).
    this.rejectBytes += rej.raw.length + (rej.rawBytes?.length ?? 0);
    return this.full();
  }

  private full(): boolean {
    return (
      this.rows.length + this.rejects.length + this.known / KNOWN_PER_LINE >= this.limit ||
      this.sink.len + this.rejectBytes >= SINK_FLUSH_BYTES
    );
  }

  /**
   * Closes the batch being filled and starts the next (of `batchSize` lines). Only once the batch
   * sent before is done: its sink becomes the next batch's.
   */
  close(batchSize: number): Batch {
    const batch: Batch = {
      rows: this.rows,
      rejects: this.rejects,
      sink: this.sink,
      drift: this.drift,
      known: this.known,
    };
    this.known = 0;
    this.rows = [];
    this.rejects = [];
    // Always a new map, even when this one is empty: the merge notes the drift of the lines it
    // parses itself (the fast path's) into the batch's map, which must not be the next batch's.
    this.drift = new Map();
    this.rejectBytes = 0;
    this.limit = batchSize;
    this.sink = this.spare.buf.length > SINK_KEEP_BYTES ? new ByteSink(SINK_BYTES) : this.spare;
    this.sink.reset();
    this.spare = batch.sink;
    return batch;
  }
}

/** One partition per checkpoint row, each on its own connection (the first is the lock's). */
export async function openPartitions(
  pool: pg.Pool,
  first: pg.PoolClient,
  cp: Checkpoints,
  batchSize: number,
): Promise<Partition[]> {
  const partitions: Partition[] = [];
  try {
    for (let i = 0; i < cp.parts; i++) {
      const client = i === 0 ? first : await pool.connect();
      // Lines spread evenly over the partitions, so equal batches would all fill, and be sent,
      // at the same moment: the first batches are cut short by steps to stagger them.
      const limit = Math.max(1, Math.ceil((batchSize * (i + 1)) / cp.parts));
      partitions.push(new Partition(i, client, cp.committed[i] ?? 0, limit));
    }
  } catch (err) {
    for (const p of partitions) if (p.client !== first) p.client.release();
    throw new CrsError('DB_UNAVAILABLE', `cannot open warehouse connections: ${errorMessage(err)}`, {
      retryable: true,
      cause: err,
    });
  }
  return partitions;
}
