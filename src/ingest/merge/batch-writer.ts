import { setTimeout as sleep } from 'node:timers/promises';
import { emptyCounts, type LoadCounts } from '../../common/counts.ts';
import { CrsError } from '../../errors.ts';
import { dbFailureKind } from '../../warehouse/db-errors.ts';
import type { FastPathGate } from './fast-path.ts';
import { type BatchCounts, type BatchTarget, mergeBatch } from './merge.ts';
import type { Batch, Partition } from './partition.ts';

/**
 * Sends the partitions' batches to the merge, one in flight per partition while the next fills,
 * and keeps what they share: the first failure (which stops the load), the counts of committed
 * batches, the threads already queued, the fast path's statistics.
 */

const MAX_QUEUED_THREADS = 100_000;

/** What every batch of a load carries (the rest of BatchTarget is per batch). */
export type LoadBatches = Omit<
  BatchTarget,
  'part' | 'uptoLine' | 'sink' | 'drift' | 'known' | 'stageAll' | 'queuedThreads'
>;

export class BatchWriter {
  /** The first error of a batch: every later step of the load throws it. */
  failure: unknown = null;
  /** Sums over committed batches (rowsRead and rejected are reported as progress). */
  readonly totals: LoadCounts = emptyCounts();
  // Bounded: a load of millions of threads starts over rather than hold them all.
  private readonly queuedThreads = new Set<string>();
  private readonly target: LoadBatches;
  private readonly batchSize: number;
  private readonly gate: FastPathGate;
  private readonly signal: AbortSignal | undefined;
  private readonly onCommit: () => void;

  constructor(opts: {
    target: LoadBatches;
    batchSize: number;
    gate: FastPathGate;
    signal?: AbortSignal | undefined;
    onCommit: () => void;
  }) {
    this.target = opts.target;
    this.batchSize = opts.batchSize;
    this.gate = opts.gate;
    this.signal = opts.signal;
    this.onCommit = opts.onCommit;
  }

  /** Waits for the partition's batch in flight; throws the load's failure if there is one. */
  async idle(p: Partition): Promise<void> {
    if (p.inflight) await p.inflight;
    if (this.failure) throw this.failure;
  }

  /** Closes the partition's batch, complete up to line `upto`, and starts its merge. */
  async send(p: Partition, upto: number): Promise<void> {
    await this.idle(p);
    // Stop between batches, not only between chunks of the source (a chunk can hold thousands).
    if (this.signal?.aborted)
      throw new CrsError('CANCELLED', 'load cancelled', { cause: this.signal.reason });
    const batch = p.close(this.batchSize);
    p.inflight = this.merge(p, batch, upto).then(
      () => {
        p.inflight = null;
      },
      (err) => {
        p.inflight = null;
        this.failure ??= err;
      },
    );
  }

  /** Waits for every batch in flight; throws the load's failure if there is one. */
  async drain(partitions: readonly Partition[]): Promise<void> {
    await Promise.all(partitions.map((p) => p.inflight));
    if (this.failure) throw this.failure;
  }

  private async merge(p: Partition, batch: Batch, upto: number): Promise<void> {
    let stageAll = false;
    let skipLookup = p.skipLookup;
    for (let attempt = 1; ; attempt++) {
      try {
        const c = await mergeBatch(p.client, batch.rows, batch.rejects, {
          ...this.target,
          part: p.index,
          uptoLine: upto,
          sink: batch.sink,
          drift: batch.drift,
          known: batch.known,
          stageAll,
          skipLookup,
          queuedThreads: this.queuedThreads,
        });
        p.committed = upto;
        // A lookup that found none of the batch's keys: the partition's next batch goes without.
        if (c.found !== null) p.skipLookup = c.found === 0 && !p.lookupAlways;
        this.committed(c);
        return;
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === '23505' && skipLookup) {
          // A key of a batch merged without the lookup is stored: again with it, and from now
          // on always (one wasted COPY at most per partition and load).
          skipLookup = false;
          p.skipLookup = false;
          p.lookupAlways = true;
          continue;
        }
        if (code === '23505' && !stageAll) {
          // Another writer inserted one of the batch's new keys since the lookup: merge them all.
          stageAll = true;
          continue;
        }
        if (dbFailureKind(err) === 'conflict' && attempt < 4) {
          await sleep(50 * attempt);
          continue;
        }
        throw err;
      }
    }
  }

  private committed(c: BatchCounts): void {
    if (this.queuedThreads.size + c.threadIds.length > MAX_QUEUED_THREADS) this.queuedThreads.clear();
    for (const id of c.threadIds) this.queuedThreads.add(id);
    this.gate.record(c.fastTries, c.fastHits);
    this.totals.rowsRead += c.rowsRead;
    this.totals.rejected += c.rejected;
    this.totals.suppressed += c.suppressed;
    this.onCommit();
  }
}
