import { createHash, type Hash, hash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { CrsError, errorMessage, isCrsError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Warehouse } from '../warehouse/db.ts';
import { dbFailureKind, toDbCrsError } from '../warehouse/db-errors.ts';
import { ByteSink, putMessageTuple } from './copy-binary.ts';
import { type FinalizeResult, finalizeLoad } from './finalize.ts';
import { dayOfTimeText } from './iso-time.ts';
import { type SourceLine, type SplitStats, splitLines } from './line-splitter.ts';
import { type BatchCounts, mergeBatch, type PendingReject, type PendingRow, rowKey } from './merge.ts';
import { recordHash } from './record-hash.ts';
import { parseRecord, rejectCodeForLineProblem } from './record-parser.ts';
import { SeenSpill } from './seen-spill.ts';

/**
 * The loader: a byte stream of export lines into the warehouse, exactly once.
 *
 * Lines are parsed in order and routed to one of `parts` key partitions by message id. Each
 * partition owns one connection and merges its batches strictly in line order, so the later
 * line of a key always wins, while the partitions run in parallel (one connection tops out near
 * 29k rows/s here; four reach ~45k). Each batch commits with its partition's checkpoint (the
 * line up to which the partition is complete), so a load stopped anywhere and started again with
 * the same load key skips exactly the lines already merged, and its counters end as if it had
 * never stopped.
 */

export interface LoadProgress {
  linesRead: number;
  bytesRead: number;
  /** Lines of the source of which every one is committed (the slowest partition's checkpoint). */
  linesCommitted: number;
  rowsRead: number;
  rejected: number;
}

export interface LoadRequest {
  warehouse: Warehouse;
  log: Logger;
  loadId: string;
  /** Checkpoint key: the load id for an import, load id + day for an export day. */
  loadKey: string;
  source: 'export' | 'file';
  sourceName: string;
  /** Opens the source from its first byte; called again after a retryable cut. */
  open: (attempt: number) => Promise<AsyncIterable<Uint8Array>>;
  /** UTC days of which this source holds every record: rows of them it lacks are marked deleted. */
  completeDays?: { from: string; to: string } | null;
  /**
   * Asked once every line is read: why the source is not known to be whole (then nothing of
   * completeDays is deleted), or null. Unset: the source is taken as whole (a file).
   */
  incompleteReason?: () => string | null;
  /** Percent of a day's live rows above which its deletes are held for review (default 10). */
  deleteGuardPct?: number;
  /** The sync_days row this load is the export of (mirrors the checkpoint in the same transaction). */
  ledgerDay?: string | null;
  batchSize: number;
  parts: number;
  maxLineBytes: number;
  /** How often a cut stream is reopened before the load fails (retryably). */
  maxReopens?: number;
  signal?: AbortSignal;
  onProgress?: (p: LoadProgress) => void;
}

export interface LoadSummary extends FinalizeResult {
  loadId: string;
  linesRead: number;
  bytesRead: number;
  /** Whether lines were skipped because an earlier attempt had committed them. */
  resumed: boolean;
  resumedFromLine: number;
  /** How many times the source was reopened after a retryable cut. */
  reopens: number;
  elapsedMs: number;
}

interface Partition {
  index: number;
  client: pg.PoolClient;
  rows: PendingRow[];
  rejects: PendingReject[];
  /** Bytes the batch's rejects hold outside the sink (their raw text), counted toward its bound. */
  rejectBytes: number;
  committed: number;
  inflight: Promise<void> | null;
  /** Records of lines an earlier attempt committed, waiting to be checked against the warehouse. */
  verify: PendingRow[];
  /** Tuples of `rows`, and the sink of the batch in flight (reused once that batch is done). */
  sink: ByteSink;
  spare: ByteSink;
  /** Lines of the batch being filled at which it is sent. */
  limit: number;
}

// A batch is sent when it holds batchSize lines or its sink this many bytes, whichever comes first,
// so that a sink keeps its initial size (unless one line alone is larger; a sink that grew for
// such a line, up to the 16 MiB limit, is not kept at that size).
const SINK_BYTES = 1 << 21;
const SINK_FLUSH_BYTES = SINK_BYTES - (1 << 16);
const SINK_KEEP_BYTES = 1 << 23;
const MAX_QUEUED_THREADS = 100_000;

function partOf(messageId: string, parts: number): number {
  // The last 8 hex digits are random in v4 and v7 UUIDs alike (v7 starts with a timestamp).
  return Number.parseInt(messageId.slice(-8), 16) % parts;
}

const ID_KEY = Buffer.from('"Message ID"');
const UUID_TEXT = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

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
  return UUID_TEXT.test(id) ? id.toLowerCase() : undefined;
}

function renderRaw(bytes: Buffer): string {
  return bytes.toString('utf8').replaceAll('\u0000', '\\u0000');
}

function dayOfRaw(text: string): string | null {
  // Best effort, for the quarantine's `day` column: a real calendar date or null, never the raw
  // text (PostgreSQL refuses 2026-02-30 as a date, which would fail the batch).
  const m = /"Message Time"\s*:\s*"(\d{4}-\d{2}-\d{2}[^"\\]{0,64})"/.exec(text);
  return m?.[1] === undefined ? null : dayOfTimeText(m[1]);
}

/**
 * Runs a load under a session advisory lock on its load key (in its schema), so that two
 * processes never run the same load at once (say, the same file imported twice at the same time,
 * which derives one load id): they would share its checkpoint rows and count lines twice. The
 * second one fails at once, retryably, and resumes from the checkpoint when started again. The
 * lock's connection is the first partition's, so a load needs no extra connection.
 */
export async function runLoad(req: LoadRequest): Promise<LoadSummary> {
  const started = Date.now();
  let first: pg.PoolClient;
  try {
    first = await req.warehouse.pool.connect();
  } catch (err) {
    throw new CrsError('DB_UNAVAILABLE', `cannot open warehouse connections: ${errorMessage(err)}`, {
      retryable: true,
      cause: err,
    });
  }
  const lockKey = `crs-sync:load:${req.warehouse.schema}:${req.loadKey}`;
  let locked = false;
  try {
    const r = await first.query<{ ok: boolean }>('select pg_try_advisory_lock(hashtext($1)) as ok', [
      lockKey,
    ]);
    locked = r.rows[0]?.ok === true;
    if (!locked) {
      throw new CrsError(
        'LOAD_BUSY',
        `load ${req.loadId} is running in another process; when it has ended, run this again to resume it`,
        { retryable: true },
      );
    }
    return await runLocked(req, first, started);
  } catch (err) {
    // Also the checkpoint reads and the finalize: a dropped connection there is retryable too.
    throw toDbCrsError(err, 'LOAD_FAILED', `load ${req.loadId} failed`);
  } finally {
    if (locked) {
      await first.query('select pg_advisory_unlock(hashtext($1))', [lockKey]).then(
        () => first.release(),
        (err: Error) => first.release(err),
      );
    } else first.release();
  }
}

async function runLocked(req: LoadRequest, first: pg.PoolClient, started: number): Promise<LoadSummary> {
  const { warehouse, log } = req;
  const pool = warehouse.pool;

  // Checkpoint rows: created once per load key; an existing load keeps its partition count.
  await pool.query(
    `insert into load_checkpoints (load_key, part, parts)
     select $1, g, $2 from generate_series(0, $2 - 1) g
     on conflict (load_key, part) do nothing`,
    [req.loadKey, req.parts],
  );
  const cp = await pool.query<{ part: number; parts: number; lines_committed: number }>(
    'select part, parts, lines_committed from load_checkpoints where load_key = $1 order by part',
    [req.loadKey],
  );
  const parts = cp.rows[0]?.parts ?? req.parts;
  const committedAtStart = cp.rows.map((r) => r.lines_committed);
  const resumedFromLine = Math.min(...committedAtStart);
  const resumed = committedAtStart.some((c) => c > 0);
  if (resumed) log.info({ loadKey: req.loadKey, resumedFromLine }, 'resuming load from its checkpoint');

  const partitions: Partition[] = [];
  try {
    for (let i = 0; i < parts; i++) {
      partitions.push({
        index: i,
        client: i === 0 ? first : await pool.connect(),
        rows: [],
        rejects: [],
        rejectBytes: 0,
        committed: committedAtStart[i] ?? 0,
        inflight: null,
        verify: [],
        sink: new ByteSink(SINK_BYTES),
        spare: new ByteSink(SINK_BYTES),
        // Lines spread evenly over the partitions, so equal batches would all fill, and be sent,
        // at the same moment: the first batches are cut short by steps to stagger them.
        limit: Math.max(1, Math.ceil((req.batchSize * (i + 1)) / parts)),
      });
    }
  } catch (err) {
    for (const p of partitions) if (p.client !== first) p.client.release();
    throw new CrsError('DB_UNAVAILABLE', `cannot open warehouse connections: ${errorMessage(err)}`, {
      retryable: true,
      cause: err,
    });
  }

  const totals = { rowsRead: 0, rejected: 0 };
  // Bounded: a load of millions of threads starts over rather than hold them all.
  const queuedThreads = new Set<string>();
  const fast = { enabled: true, tries: 0, hits: 0, probeAt: 0 };
  let failure: unknown = null;
  const stats: SplitStats = { bytesRead: 0, linesSeen: 0, blankLines: 0 };
  let lastLine = 0;
  const seen = req.completeDays ? new SeenSpill(pool, req.loadKey) : null;
  const addSeen = (id: string) => seen!.add(id);

  const progress = (): LoadProgress => ({
    linesRead: lastLine,
    bytesRead: stats.bytesRead,
    linesCommitted: Math.min(...partitions.map((p) => p.committed)),
    rowsRead: totals.rowsRead,
    rejected: totals.rejected,
  });
  let lastProgressAt = 0;
  const report = (force = false) => {
    const now = Date.now();
    if (!req.onProgress || (!force && now - lastProgressAt < 250)) return;
    lastProgressAt = now;
    req.onProgress(progress());
  };

  const runBatch = async (
    p: Partition,
    rows: PendingRow[],
    rejects: PendingReject[],
    upto: number,
    sink: ByteSink,
  ) => {
    let stageAll = false;
    for (let attempt = 1; ; attempt++) {
      try {
        const c: BatchCounts = await mergeBatch(p.client, rows, rejects, {
          loadId: req.loadId,
          loadKey: req.loadKey,
          part: p.index,
          uptoLine: upto,
          source: req.source,
          sourceName: req.sourceName,
          ledgerDay: req.ledgerDay ?? null,
          sink,
          stageAll,
          queuedThreads,
          onSeen: seen ? addSeen : undefined,
          rejectDay: (text) => req.ledgerDay ?? dayOfRaw(text),
        });
        p.committed = upto;
        if (queuedThreads.size + c.threadsQueued.length > MAX_QUEUED_THREADS) queuedThreads.clear();
        for (const id of c.threadsQueued) queuedThreads.add(id);
        fast.tries += c.fastTries;
        fast.hits += c.fastHits;
        totals.rowsRead += c.read;
        totals.rejected += c.rejected;
        report();
        return;
      } catch (err) {
        const code = (err as { code?: string }).code;
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
  };

  const flush = async (p: Partition, upto: number) => {
    if (p.inflight) await p.inflight;
    if (failure) throw failure;
    // Stop between batches, not only between chunks of the source (a chunk can hold thousands).
    if (req.signal?.aborted) throw new CrsError('CANCELLED', 'load cancelled', { cause: req.signal.reason });
    const rows = p.rows;
    const rejects = p.rejects;
    const sink = p.sink;
    p.rows = [];
    p.rejects = [];
    p.rejectBytes = 0;
    p.limit = req.batchSize;
    // The spare's batch is done (awaited above): its buffer takes the next batch's tuples.
    p.sink = p.spare.buf.length > SINK_KEEP_BYTES ? new ByteSink(SINK_BYTES) : p.spare;
    p.sink.reset();
    p.spare = sink;
    p.inflight = runBatch(p, rows, rejects, upto, sink).then(
      () => {
        p.inflight = null;
      },
      (err) => {
        p.inflight = null;
        failure ??= err;
      },
    );
  };

  /**
   * A resumed load skips the lines its checkpoint covers, but the source may have changed since
   * (a late record inserted early in a day's export shifts every later line). So skipped records
   * are looked up, a batch at a time: one the warehouse does not hold as this line says (absent,
   * marked deleted, another version not written by a later line of this load) is merged after all.
   */
  let reverified = 0;
  const verifySkipped = async (p: Partition) => {
    if (p.inflight) await p.inflight;
    if (failure) throw failure;
    const rows = p.verify;
    p.verify = [];
    const found = await p.client.query<{ id: string; h: string; d: boolean; l: string; s: number }>({
      name: 'crs_verify',
      text: `select message_id::text as id, record_hash as h, _deleted_at is not null as d, _load_id as l,
               _source_line as s from analytics_messages where message_id = any($1::uuid[])`,
      values: [rows.map((r) => r.record!.messageId)],
    });
    const cur = new Map(found.rows.map((f) => [f.id, f]));
    for (const row of rows) {
      const rec = row.record!;
      const c = cur.get(rec.messageId);
      const held =
        c !== undefined && !c.d && (c.h === rec.recordHash || (c.l === req.loadId && c.s >= row.lineNo));
      if (!held) {
        p.rows.push(row);
        reverified++;
      }
    }
  };

  const take = async (line: SourceLine, knownHash: string | null) => {
    if (seen?.backlogged) await seen.room();
    let part: number;
    let row: PendingRow | null = null;
    let rej: PendingReject | null = null;
    if (line.problem) {
      const bytes = line.rawBytes ?? Buffer.alloc(0);
      part = line.lineNo % parts;
      rej = {
        lineNo: line.lineNo,
        code: rejectCodeForLineProblem(line.problem),
        detail:
          line.problem === 'line_too_long'
            ? `line of ${line.byteLength} bytes exceeds the limit of ${req.maxLineBytes} bytes (first ${bytes.length} bytes kept)`
            : line.problem === 'invalid_utf8'
              ? 'line is not valid UTF-8 (exact bytes kept in raw_bytes)'
              : 'line contains a NUL byte, which PostgreSQL text cannot hold (exact bytes kept in raw_bytes)',
        raw: renderRaw(bytes),
        rawBytes: bytes,
        rawLength: line.byteLength,
        day: req.ledgerDay ?? null,
      };
    } else {
      const bytes = line.bytes!;
      const lineHash = knownHash ?? hash('sha1', bytes, 'hex');
      // The fast path pays off when most lines are already stored (a re-load); while most are
      // new (a first load) parsing up front overlaps better with the batches in flight.
      if (fast.tries >= 4000) {
        fast.enabled = fast.hits * 2 >= fast.tries;
        fast.tries = 0;
        fast.hits = 0;
        fast.probeAt = line.lineNo + 20 * req.batchSize * parts;
      } else if (!fast.enabled && line.lineNo >= fast.probeAt) {
        fast.enabled = true; // try again now and then: a load may reach days already stored
      }
      const quickId = fast.enabled ? quickMessageId(bytes) : undefined;
      if (quickId !== undefined) {
        const p = partitions[partOf(quickId, parts)]!;
        if (line.lineNo > p.committed) {
          // Parsed in the batch, and only if the warehouse lacks a row loaded from these bytes;
          // till then the line waits as bytes in the batch's sink, not as a string on the heap.
          if (p.verify.length > 0) await verifySkipped(p);
          const rawAt = p.sink.put(bytes);
          p.rows.push({ lineNo: line.lineNo, lineHash, quickId, rawAt, rawEnd: p.sink.len });
          if (p.rows.length + p.rejects.length >= p.limit || p.sink.len >= SINK_FLUSH_BYTES)
            await flush(p, line.lineNo);
          return;
        }
      }
      const text = bytes.toString('utf8');
      // Hashed as it is encoded (copy-binary.ts), or below for a line to check, not to write.
      const parsed = parseRecord(text, { hash: false });
      if (parsed.ok) {
        const rec = parsed.record;
        part = partOf(rec.messageId, parts);
        const p = partitions[part]!;
        if (seen) seen.add(rec.messageId);
        if (line.lineNo <= p.committed) {
          // Merged by an earlier attempt, if the source still says what it said then: checked in
          // bulk, and encoded only if it must be merged after all.
          rec.recordHash = recordHash(
            rec.messageId,
            rec.threadId,
            rec.userId,
            rec.messageTime,
            rec.input,
            rec.response,
            rec.extra,
          );
          p.verify.push({ lineNo: line.lineNo, lineHash, record: rowKey(rec), text });
          if (p.verify.length >= req.batchSize) await verifySkipped(p);
          return;
        }
        if (p.verify.length > 0) await verifySkipped(p);
        // Encoded now, so that the record's texts die young (see copy-binary.ts).
        const at = putMessageTuple(p.sink, rec, line.lineNo, req.loadId, lineHash);
        row = { lineNo: line.lineNo, lineHash, record: rowKey(rec), at, end: p.sink.len };
      } else {
        part = line.lineNo % parts;
        rej = {
          lineNo: line.lineNo,
          code: parsed.code,
          detail: parsed.detail,
          raw: text,
          rawBytes: null,
          rawLength: line.byteLength,
          day: req.ledgerDay ?? dayOfRaw(text),
        };
      }
    }
    const p = partitions[part]!;
    if (line.lineNo <= p.committed) {
      // Merged by an earlier attempt, if the source still says what it said then: checked in bulk.
      if (row) {
        p.verify.push(row);
        if (p.verify.length >= req.batchSize) await verifySkipped(p);
      }
      return;
    }
    if (p.verify.length > 0) await verifySkipped(p);
    if (row) p.rows.push(row);
    else if (rej) {
      p.rejects.push(rej);
      // Held outside the sink: counted toward the batch's bound, or a day of huge rejected lines
      // would grow one batch without limit (a text's length in UTF-16 units approximates its bytes).
      p.rejectBytes += rej.raw.length + (rej.rawBytes?.length ?? 0);
    }
    if (p.rows.length + p.rejects.length >= p.limit || p.sink.len + p.rejectBytes >= SINK_FLUSH_BYTES)
      await flush(p, line.lineNo);
  };

  // A digest of the lines taken so far, in order. A stream reopened after a cut must repeat them
  // exactly, or it is another version of the source (a late record inserted early in a day's
  // export shifts every later line) and skipping its first lines by count would lose or double
  // records: then the attempt fails retryably, and the next one resumes from the committed
  // checkpoint, where skipped lines are checked against the warehouse (verifySkipped). It is
  // kept over the lines' own hashes, which the merge needs anyway: hashing the bytes a second
  // time cost ~2 µs per 2 KB line on the loader's busiest thread.
  const taken = createHash('sha1');
  const digestLine = (h: Hash, line: SourceLine): string | null => {
    if (line.bytes) {
      const lineHash = hash('sha1', line.bytes, 'hex');
      h.update(lineHash);
      return lineHash;
    }
    h.update(line.rawBytes ?? Buffer.alloc(0)).update(`\u0000${line.byteLength}\n`);
    return null;
  };

  let reopens = 0;
  try {
    await seen?.reset();
    const maxReopens = req.maxReopens ?? 5;
    for (let attempt = 0; ; attempt++) {
      reopens = attempt;
      // After a cut, the stream starts again from its first line; lines up to `lastLine` are
      // already in a partition (buffered or committed) and are skipped.
      const skipUpTo = lastLine;
      const prefix = skipUpTo > 0 ? createHash('sha1') : null;
      let prefixChecked = prefix === null;
      const checkPrefix = (atLine: number) => {
        prefixChecked = true;
        if (prefix!.digest('hex') !== taken.copy().digest('hex')) {
          throw new CrsError(
            'SOURCE_CHANGED',
            `the source changed while it was read: reopened after a cut, its lines 1-${skipUpTo} differ from the first read (seen at line ${atLine}); the load resumes from its committed checkpoint`,
            { retryable: true, details: { skipUpTo, atLine } },
          );
        }
      };
      try {
        const stream = await req.open(attempt);
        const lineStats: SplitStats = { bytesRead: 0, linesSeen: 0, blankLines: 0 };
        for await (const lines of splitLines(stream, { maxLineBytes: req.maxLineBytes }, lineStats)) {
          if (req.signal?.aborted)
            throw new CrsError('CANCELLED', 'load cancelled', { cause: req.signal.reason });
          if (failure) throw failure;
          for (const line of lines) {
            if (line.lineNo <= skipUpTo) {
              digestLine(prefix!, line);
              if (line.lineNo === skipUpTo) checkPrefix(line.lineNo);
              continue;
            }
            if (!prefixChecked) checkPrefix(line.lineNo);
            await take(line, digestLine(taken, line));
            lastLine = line.lineNo;
          }
          stats.bytesRead = Math.max(stats.bytesRead, lineStats.bytesRead);
          report();
        }
        if (!prefixChecked) checkPrefix(lineStats.linesSeen);
        // Blank lines at the end still count as read.
        lastLine = Math.max(lastLine, lineStats.linesSeen);
        stats.bytesRead = Math.max(stats.bytesRead, lineStats.bytesRead);
        break;
      } catch (err) {
        if (
          failure ||
          !isCrsError(err) ||
          !err.retryable ||
          err.code === 'CANCELLED' ||
          err.code === 'SOURCE_CHANGED' ||
          attempt >= maxReopens
        ) {
          throw err;
        }
        log.warn({ err, attempt: attempt + 1, afterLine: lastLine }, 'source stream failed; reopening it');
        await sleep(Math.min(250 * 2 ** attempt, 5000), undefined, { signal: req.signal });
      }
    }
    // Every partition ends at the last line, so the checkpoint shows the whole source merged.
    for (const p of partitions) if (p.verify.length > 0) await verifySkipped(p);
    if (reverified > 0)
      log.warn({ reverified }, 'the source changed since the checkpoint: re-merged skipped lines');
    for (const p of partitions) await flush(p, lastLine);
    await Promise.all(partitions.map((p) => p.inflight));
    if (failure) throw failure;
    await seen?.finish();
  } catch (err) {
    failure ??= err;
    await Promise.allSettled(partitions.map((p) => p.inflight));
  } finally {
    // The first partition's connection holds the load's lock: runLoad releases it.
    for (const p of partitions)
      if (p.client !== first) p.client.release(failure !== null && !isCrsError(failure));
  }
  if (failure) {
    // Best effort: the next attempt clears them anyway, but a load never run again would leave them.
    await seen?.discard().catch(() => {});
    if (isCrsError(failure)) throw failure;
    // A lost connection or a timeout is retryable: run again, the load resumes at its checkpoint.
    throw toDbCrsError(failure, 'LOAD_FAILED', `load ${req.loadId} failed`);
  }
  report(true);

  const merged = Date.now();
  log.debug({ loadKey: req.loadKey, elapsedMs: merged - started }, 'every line merged; finalizing');
  const fin = await finalizeLoad(warehouse, {
    loadId: req.loadId,
    loadKey: req.loadKey,
    seen: seen !== null,
    ...(seen ? { seenCount: seen.count } : {}),
    incompleteReason: req.incompleteReason?.() ?? null,
    deleteGuardPct: req.deleteGuardPct,
    completeDays: req.completeDays ?? null,
    ledgerDay: req.ledgerDay ?? null,
    bytes: stats.bytesRead,
  });
  log.debug({ loadKey: req.loadKey, finalizeMs: Date.now() - merged }, 'load finalized');
  return {
    ...fin,
    loadId: req.loadId,
    linesRead: lastLine,
    bytesRead: stats.bytesRead,
    resumed,
    resumedFromLine,
    reopens,
    elapsedMs: Date.now() - started,
  };
}
