import { hash } from 'node:crypto';
import { itemAt } from '../../common/checked.ts';
import type { SourceLine } from '../parse/line-splitter.ts';
import { type ExportContract, lastDrift, parseRecord } from '../parse/record-parser.ts';
import type { BatchWriter } from './batch-writer.ts';
import { type FastPathGate, quickMessageId } from './fast-path.ts';
import type { KnownLines } from './known-lines.ts';
import { type Partition, partOf } from './partition.ts';
import {
  checkedRow,
  dayOfRaw,
  encodeRecord,
  lineReject,
  type PendingReject,
  type PendingRow,
  textReject,
} from './pending.ts';
import type { RejectsSeen } from './rejects-seen.ts';
import { verifySkipped } from './resume.ts';
import type { SeenSpill } from './seen-spill.ts';

/**
 * Takes the lines of the source in order and puts each into its partition's batch: a record by
 * its message id (on the fast path read from its bytes, otherwise parsed and encoded here), a
 * reject by its line number. A line an earlier attempt committed is not merged again but queued
 * for the check against the warehouse (resume.ts); a full batch is sent to the writer.
 */
export class LineRouter {
  /** Skipped lines found changed since the checkpoint, merged after all. */
  reverified = 0;
  private readonly partitions: readonly Partition[];
  private readonly writer: BatchWriter;
  private readonly seen: SeenSpill | null;
  private readonly gate: FastPathGate;
  /** The open day's lines the warehouse holds, on an intraday pull (known-lines.ts); else null. */
  private readonly known: KnownLines | null;
  /** Every quarantined line of the source, committed ones too (rejects-seen.ts). */
  private readonly rejectsSeen: RejectsSeen | null;
  private readonly opts: {
    /** The run's id: each row's `_load_id`. */
    runId: string;
    batchSize: number;
    maxLineBytes: number;
    /** A day load's export day: every line of it is counted on that day. */
    day: string | null;
    contract: ExportContract;
  };

  constructor(
    partitions: readonly Partition[],
    writer: BatchWriter,
    seen: SeenSpill | null,
    gate: FastPathGate,
    opts: {
      runId: string;
      batchSize: number;
      maxLineBytes: number;
      day: string | null;
      contract: ExportContract;
      known?: KnownLines | null;
      rejectsSeen?: RejectsSeen | null;
    },
  ) {
    this.partitions = partitions;
    this.writer = writer;
    this.seen = seen;
    this.gate = gate;
    this.known = opts.known ?? null;
    this.rejectsSeen = opts.rejectsSeen ?? null;
    this.opts = opts;
  }

  /** One line of the source; `sha1` is the digest of its bytes (null for a line with a problem). */
  async take(line: SourceLine, sha1: Buffer | null): Promise<void> {
    if (this.seen?.backlogged) await this.seen.room();
    if (line.problem) {
      const rej = lineReject(line, line.problem, this.opts.maxLineBytes, this.opts.day);
      await this.takeReject(line.lineNo, rej, this.rejectPartition(line.lineNo, undefined));
      return;
    }
    const bytes = line.bytes ?? Buffer.alloc(0);
    const digest = sha1 ?? hash('sha1', bytes, 'buffer');
    const known = this.known;
    if (known) {
      const tail = known.find(digest);
      if (tail >= 0) {
        await this.takeKnown(line.lineNo, itemAt(this.partitions, tail % this.partitions.length));
        return;
      }
    }
    const hashHex = digest.toString('hex');
    const quickId = this.gate.open(line.lineNo) ? quickMessageId(bytes) : undefined;
    if (quickId !== undefined) {
      known?.route(quickId);
      const p = this.partitionOf(quickId);
      if (line.lineNo > p.committed) {
        // Parsed in the batch, and only if the warehouse lacks a row loaded from these bytes;
        // till then the line waits as bytes in the batch's sink, not as a string on the heap.
        if (p.verify.length > 0) await this.verify(p);
        if (p.addRaw(line.lineNo, hashHex, quickId, bytes)) await this.writer.send(p, line.lineNo);
        return;
      }
    }
    const text = bytes.toString('utf8');
    // Hashed as it is encoded (copy-binary.ts), or below for a line to check, not to write. The
    // text is valid UTF-8 decoded (the splitter checked), so well-formed: no scan for that.
    const parsed = parseRecord(text, { hash: false, fromUtf8: true, contract: this.opts.contract });
    // Read before anything else parses: the parser reuses the list. Drift counts only of a line
    // that loads, or is held for that drift (`schema_drift`, so that accepting it releases it); a
    // line quarantined for anything else is counted in the quarantine, not as the service's fields.
    const drifted = lastDrift().length > 0;
    if (!parsed.ok) {
      const day = this.opts.day ?? dayOfRaw(text);
      // The partition the fast path would have sent the line to, open or not (quickId is
      // undefined while the gate is closed): an earlier attempt committed it there or nowhere.
      const p = this.rejectPartition(line.lineNo, quickId ?? quickMessageId(bytes));
      if (drifted && parsed.code === 'schema_drift') this.noteDrift(p, line.lineNo, day);
      await this.takeReject(line.lineNo, textReject(line.lineNo, parsed, text, bytes, day), p);
      return;
    }
    const rec = parsed.record;
    known?.route(rec.messageId);
    const p = this.partitionOf(rec.messageId);
    if (drifted) this.noteDrift(p, line.lineNo, rec.messageDate);
    this.seen?.add(rec.messageId);
    if (line.lineNo <= p.committed) {
      // Merged by an earlier attempt, if the source still says what it said then: checked in
      // bulk, and encoded only if it must be merged after all.
      p.verify.push(checkedRow(rec, line.lineNo, hashHex, text));
      if (p.verify.length >= this.opts.batchSize) await this.verify(p);
      return;
    }
    if (p.verify.length > 0) await this.verify(p);
    // Encoded now, so that the record's texts die young (see copy-binary.ts).
    const row: PendingRow = encodeRecord(p.sink, rec, line.lineNo, this.opts.runId, hashHex);
    if (p.addRow(row)) await this.writer.send(p, line.lineNo);
  }

  /** Checks every partition's remaining skipped lines (the source has ended). */
  async verifyAll(): Promise<void> {
    for (const p of this.partitions) if (p.verify.length > 0) await this.verify(p);
  }

  /**
   * A line the warehouse holds byte for byte (known-lines.ts): counted as read and unchanged with
   * its key partition's next checkpoint. One an earlier attempt committed was counted then.
   */
  private async takeKnown(lineNo: number, p: Partition): Promise<void> {
    if (lineNo <= p.committed) return;
    if (p.verify.length > 0) await this.verify(p);
    if (this.known) this.known.skipped++;
    if (p.addKnown()) await this.writer.send(p, lineNo);
  }

  private async takeReject(lineNo: number, rej: PendingReject, p: Partition): Promise<void> {
    // Noted whether or not an earlier attempt committed it: the finalize needs every one.
    this.rejectsSeen?.note(rej);
    // Merged by an earlier attempt: a reject is not checked again (nor counted again: its load
    // is the last its quarantine row names already, merge.ts).
    if (lineNo <= p.committed) return;
    if (p.verify.length > 0) await this.verify(p);
    if (p.addReject(rej)) await this.writer.send(p, lineNo);
  }

  /** A line's drift into its partition's batch, unless an earlier attempt committed the line (and counted it). */
  private noteDrift(p: Partition, lineNo: number, day: string | null): void {
    if (lineNo > p.committed) p.noteDrift(lineNo, day, lastDrift());
  }

  /**
   * A rejected line's partition: by the id the fast path reads from its bytes when there is one,
   * as the fast path sends it (its merge quarantines it there, merge.ts `decide`), else by its
   * line number. Never by whether the fast path is open now: a resumed load must find the line
   * in the partition whose checkpoint covers it, or count it a second time.
   */
  private rejectPartition(lineNo: number, quickId: string | undefined): Partition {
    return quickId === undefined
      ? itemAt(this.partitions, lineNo % this.partitions.length)
      : this.partitionOf(quickId);
  }

  private partitionOf(messageId: string): Partition {
    return itemAt(this.partitions, partOf(messageId, this.partitions.length));
  }

  // Called only when there is something to check (`p.verify.length > 0`): an awaited call per line
  // would cost a promise and a turn of the microtask queue for every line of a load.
  private async verify(p: Partition): Promise<void> {
    await this.writer.idle(p);
    this.reverified += await verifySkipped(p, this.opts.runId);
  }
}
