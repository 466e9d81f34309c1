import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type { LoadCounts } from '../../common/counts.ts';
import { exportDayOf, type LoadTarget, loadIdOf, wholeDaysOf } from '../../common/load-target.ts';
import { storedUserIds } from '../../common/pseudonym.ts';
import type { Config } from '../../config.ts';
import { CrsError, errorMessage, isCrsError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { Warehouse } from '../../warehouse/db.ts';
import { toDbCrsError } from '../../warehouse/db-errors.ts';
import { type Checkpoints, openCheckpoints } from '../../warehouse/load/checkpoints.ts';
import { removeDeadSpills } from '../../warehouse/load/delete-guard.ts';
import { loadLockPrefix, tryLoadLock, unlockLoad } from '../../warehouse/load/lock.ts';
import { retainedFrom } from '../../warehouse/privacy/retention.ts';
import { checkUserIdPolicy } from '../../warehouse/privacy/user-ids.ts';
import { acceptedDriftPaths } from '../../warehouse/schema-drift.ts';
import type { DaySummary } from '../finalize/counts.ts';
import { finalizeLoad, watchesHeld } from '../finalize/finalize.ts';
import { type SplitStats, splitLines } from '../parse/line-splitter.ts';
import {
  EXPORT_CONTRACT,
  type ExportContract,
  exportContract,
  widenContract,
} from '../parse/record-parser.ts';
import { BatchWriter } from './batch-writer.ts';
import { FastPathGate } from './fast-path.ts';
import { KNOWN_LINES_MAX, type KnownLines, readKnownLines } from './known-lines.ts';
import { openPartitions, type Partition } from './partition.ts';
import { RejectsSeen } from './rejects-seen.ts';
import { LineDigest } from './resume.ts';
import { LineRouter } from './router.ts';
import { SeenSpill } from './seen-spill.ts';

export { quickMessageId } from './fast-path.ts';

/**
 * The loader: a byte stream of export lines into the warehouse, exactly once.
 *
 * Lines are parsed in order and routed to one of `parts` key partitions by message id
 * (router.ts, partition.ts). Each partition owns one connection and merges its batches strictly
 * in line order (batch-writer.ts, merge.ts), so the later line of a key always wins, while the
 * partitions run in parallel (one connection tops out near 29k rows/s here; four reach ~45k).
 * Each batch commits with its partition's checkpoint (the line up to which the partition is
 * complete), so a load stopped anywhere and started again with the same load id skips exactly
 * the lines already merged, and its counters end as if it had never stopped (resume.ts). Once
 * every line is merged, finalize.ts deletes, refreshes threads and writes the day ledger.
 */

export interface LoadProgress {
  linesRead: number;
  bytesRead: number;
  /** Lines of the source of which every one is committed (the slowest partition's checkpoint). */
  linesCommitted: number;
  rowsRead: number;
  rejected: number;
}

/**
 * How the loader works, from the config (`loaderSettings`): the same for every load, an export
 * day's, an import's, a replay's. A caller may change one for a load of its own (a replay takes
 * one partition; a test or a bench, small batches).
 */
export interface LoaderSettings {
  /** CRS_BATCH_SIZE: lines per batch of a partition. */
  batchSize: number;
  /** CRS_LOAD_PARTITIONS: key partitions, each on a connection of its own. */
  parts: number;
  /** CRS_MAX_LINE_BYTES: a longer line is quarantined (its first bytes kept). */
  maxLineBytes: number;
  /**
   * CRS_USER_ID_POLICY: user ids as sent (default) or pseudonymised (src/common/pseudonym.ts). A
   * load checks it is the warehouse's before it writes; `contract` stores the ids by it.
   */
  userIds?: Config['userIds'];
  /**
   * The record contract as the config makes it (CRS_RECORD_CONTRACT: `freeze` quarantines records
   * that drift from it; the user ids as CRS_USER_ID_POLICY stores them), which each load widens by
   * the drift accepted in the warehouse. Default: evolve, ids as sent.
   */
  contract?: ExportContract;
  /**
   * The first UTC day whose rows keep their text (CRS_TEXT_RETENTION_DAYS before today): rows of
   * older days are written without it. None: every text is kept.
   */
  textBefore?: string | undefined;
  /** CRS_DELETE_GUARD: percent of a day's live rows above which its deletes are held for review (default 10). */
  deleteGuardPct?: number;
  /** CRS_DELETE_GUARD_LOAD: percent of a multi-day load's live rows above which all its deletes are held (default 2). */
  deleteGuardLoadPct?: number;
  /**
   * On an intraday pull (an open day's load), skip the lines the warehouse holds byte for
   * byte (known-lines.ts) while the day has at most this many live rows (CRS_KNOWN_LINES_MAX,
   * default KNOWN_LINES_MAX). 0 sends every line through the merge, as a complete pull does: the
   * comparison the tests and the bench make.
   */
  knownLinesMax?: number;
  /**
   * CRS_SOURCE_REOPEN_PAUSE: the pause before the first reopen, doubled at each next one up to
   * REOPEN_PAUSE_CAP_MS (or this pause, if larger). Default 250 ms.
   */
  reopenPauseMs?: number;
}

/**
 * The loader's settings as the config gives them: the one place a load's settings are read, and
 * where what they imply is worked out once, as the request is built (the contract, the retention's
 * first day), so the load is handed values.
 */
export function loaderSettings(config: Config): LoaderSettings {
  return {
    batchSize: config.batchSize,
    parts: config.loadConnections,
    maxLineBytes: config.maxLineBytes,
    userIds: config.userIds,
    contract: exportContract({
      freeze: config.schemaContract === 'freeze',
      storedUserId: storedUserIds(config.userIds),
    }),
    ...(config.textRetentionDays === undefined ? {} : { textBefore: retainedFrom(config.textRetentionDays) }),
    deleteGuardPct: config.deleteGuardPct,
    deleteGuardLoadPct: config.deleteGuardLoadPct,
    knownLinesMax: config.knownLinesMax,
    reopenPauseMs: config.sourceReopenPauseMs,
  };
}

/** A load: what it loads and from where, how it reports, and the loader's settings. */
export interface LoadRequest extends LoaderSettings {
  warehouse: Warehouse;
  log: Logger;
  /**
   * What is loaded, under which run (src/common/load-target.ts): a closed day (its rows the
   * export lacks are deleted), an open day (an intraday pull: loaded, never deleted from, marked
   * `partial`; finalize.ts) or a file (rows of the days it holds whole are deleted). Its load id
   * is the checkpoint's key.
   */
  target: LoadTarget;
  /** Opens the source from its first byte; called again after a retryable cut. */
  open: (attempt: number) => Promise<AsyncIterable<Uint8Array>>;
  /**
   * Asked once every line is read: why the source is not known to be whole (then nothing of
   * its whole days is deleted), or null. Unset: the source is taken as whole (a file).
   */
  incompleteReason?: () => string | null;
  /**
   * false: no line takes the fast path (fast-path.ts): each is parsed before it is routed. The
   * slow path the differential tests compare the fast one with; default true.
   */
  fastPath?: boolean;
  /**
   * Quarantine this load's rejects as rows of its own, not as the one open reject of each line
   * (merge.ts `rejectsPerLoad`): `rejects replay`.
   */
  rejectsPerLoad?: boolean;
  /** How often a cut stream is reopened before the load fails (retryably). */
  maxReopens?: number;
  signal?: AbortSignal;
  onProgress?: (p: LoadProgress) => void;
}

/** A load's counts (src/common/counts.ts: `pickCounts(summary)` takes them) and how it went. */
export interface LoadSummary extends LoadCounts {
  /**
   * The run's id (`sync_runs.load_id`; the `_load_id` of the rows it wrote). Kept under this name:
   * the import prints it, and for a file the run id is the load id.
   */
  loadId: string;
  /** Per UTC day of the records (and the export day of a day's load). */
  days: DaySummary[];
  /** Whether lines were skipped because an earlier attempt had committed them. */
  resumed: boolean;
  resumedFromLine: number;
  /** How many times the source was reopened after a retryable cut. */
  reopens: number;
  elapsedMs: number;
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
  const loadId = loadIdOf(req.target);
  const lockKey = `${loadLockPrefix(req.warehouse.schema)}${loadId}`;
  let locked = false;
  try {
    locked = await tryLoadLock(first, lockKey);
    if (!locked) {
      throw new CrsError(
        'LOAD_BUSY',
        `load ${loadId} is running in another process; when it has ended, run this again to resume it`,
        { retryable: true },
      );
    }
    return await runLocked(req, first, started);
  } catch (err) {
    // Also the checkpoint reads and the finalize: a dropped connection there is retryable too.
    throw toDbCrsError(err, 'LOAD_FAILED', `load ${loadId} failed`);
  } finally {
    if (locked) {
      await unlockLoad(first, lockKey).then(
        () => first.release(),
        (err: Error) => first.release(err),
      );
    } else first.release();
  }
}

/** Lines and bytes of the source read so far (the furthest any opening of it got). */
interface SourceRead {
  linesRead: number;
  bytesRead: number;
  /** How many times the source was reopened after a retryable cut. */
  reopens: number;
}
/**
 * One load under its lock, in three movements: everything it needs opened (`openLoad`), the
 * source merged (`mergeSource`), then the finalize and the load's summary.
 */
async function runLocked(req: LoadRequest, first: pg.PoolClient, started: number): Promise<LoadSummary> {
  const { warehouse, log, target } = req;
  const loadId = loadIdOf(target);
  const progress = new ProgressReport(req.onProgress);
  const { cp, known, seen, rejectsSeen, merging } = await openLoad(req, first, progress);
  // What the report reads from once the partitions are open (no batch commits before).
  progress.watch(merging.partitions, merging.writer);
  await mergeSource(merging);
  progress.report(true);
  const merged = Date.now();
  log.debug(
    { loadId, elapsedMs: merged - started, knownLines: known?.size, skipped: known?.skipped },
    'every line merged; finalizing',
  );
  const fin = await finalizeLoad(warehouse, {
    target,
    seen: seen !== null,
    ...(seen ? { seenCount: seen.count } : {}),
    rejects: rejectsSeen,
    incompleteReason: req.incompleteReason?.() ?? null,
    deleteGuardPct: req.deleteGuardPct,
    deleteGuardLoadPct: req.deleteGuardLoadPct,
    bytes: progress.read.bytesRead,
    onPhases: (phaseMs) => log.debug({ loadId, phaseMs }, 'finalize phases'),
  });
  log.debug({ loadId, finalizeMs: Date.now() - merged }, 'load finalized');
  return {
    ...fin,
    loadId: target.runId,
    linesRead: progress.read.linesRead,
    bytesRead: progress.read.bytesRead,
    resumed: cp.resumed,
    resumedFromLine: cp.resumedFromLine,
    reopens: progress.read.reopens,
    elapsedMs: Date.now() - started,
  };
}

/**
 * The load's progress for `onProgress`, at most every 250 ms but when forced: the source's
 * counters (`read`, which the source's reader advances) and, once the merge has them, the
 * partitions' checkpoints and the committed batches' counts.
 */
class ProgressReport {
  /** Lines and bytes of the source read so far. */
  readonly read: SourceRead = { linesRead: 0, bytesRead: 0, reopens: 0 };
  readonly #onProgress: ((p: LoadProgress) => void) | undefined;
  #lastAt = 0;
  #partitions: readonly Partition[] = [];
  #writer: BatchWriter | null = null;

  constructor(onProgress: ((p: LoadProgress) => void) | undefined) {
    this.#onProgress = onProgress;
  }

  /** What the report reads from once the partitions are open (no batch commits before). */
  watch(partitions: readonly Partition[], writer: BatchWriter): void {
    this.#partitions = partitions;
    this.#writer = writer;
  }

  report(force = false): void {
    const now = Date.now();
    if (!this.#onProgress || !this.#writer || (!force && now - this.#lastAt < 250)) return;
    this.#lastAt = now;
    this.#onProgress({
      linesRead: this.read.linesRead,
      bytesRead: this.read.bytesRead,
      linesCommitted: Math.min(...this.#partitions.map((p) => p.committed)),
      rowsRead: this.#writer.totals.rowsRead,
      rejected: this.#writer.totals.rejected,
    });
  }
}

/** What a load opened before its first line: where it starts, what it notes, what it merges with. */
interface OpenLoad {
  cp: Checkpoints;
  /** The open day's lines the warehouse holds, skipped by content (known-lines.ts), or null. */
  known: KnownLines | null;
  /** Where the load notes the ids it reads (complete days, or deletes held at its start), or null. */
  seen: SeenSpill | null;
  rejectsSeen: RejectsSeen;
  merging: Merging;
}

/**
 * Everything a load opens before its first line, in order: its checkpoints; the spills of dead
 * loads removed, and whether it notes its ids; the user id policy checked; the contract as widened
 * by the drift operators accepted (read once per load); the batch writer; on an intraday pull, the
 * open day's known lines; last the partitions on their connections, and the router feeding them.
 */
async function openLoad(req: LoadRequest, first: pg.PoolClient, progress: ProgressReport): Promise<OpenLoad> {
  const { warehouse, target, log, batchSize } = req;
  const pool = warehouse.pool;
  const loadId = loadIdOf(target);
  const cp = await openCheckpoints(pool, loadId, req.parts);
  if (cp.resumed)
    log.info({ loadId, resumedFromLine: cp.resumedFromLine }, 'resuming load from its checkpoint');
  // Ids left by loads that died (their lock is gone with their session): nothing else removes them.
  await removeDeadSpills(pool, loadLockPrefix(warehouse.schema));
  const seen = (await watchesHeld(pool, wholeDaysOf(target) !== null)) ? new SeenSpill(pool, loadId) : null;
  const rejectsSeen = new RejectsSeen(seen);
  const gate = new FastPathGate(20 * batchSize * cp.parts, req.fastPath !== false);
  await checkUserIdPolicy(pool, req.userIds ?? { policy: 'keep' });
  const contract = widenContract(
    req.contract ?? EXPORT_CONTRACT,
    await acceptedDriftPaths(warehouse.db, 'export'),
  );
  const writer = new BatchWriter({
    target: {
      target,
      contract,
      ...(req.textBefore === undefined ? {} : { textBefore: req.textBefore }),
      onSeen: seen ? (id) => seen.add(id) : undefined,
      onReject: (rej) => rejectsSeen.note(rej),
      rejectsPerLoad: req.rejectsPerLoad === true,
    },
    batchSize,
    gate,
    signal: req.signal,
    onCommit: () => progress.report(),
  });
  // Never where the load notes the ids it reads: a skipped line's id would go unnoted.
  const knownMax = req.knownLinesMax ?? KNOWN_LINES_MAX;
  const known =
    target.kind === 'open-day' && seen === null && knownMax > 0
      ? await readKnownLines(first, target.day, knownMax)
      : null;
  // Connected after every query the load makes before its merge: mergeSource releases them, and a
  // query failing before it would have left them held.
  const partitions = await openPartitions(pool, first, cp, batchSize);
  // With the day's known lines skipped, the merge sees only new and changed lines: a batch whose
  // lookup found no key is followed by one holding a changed (stored) key, whose COPY without the
  // lookup would fail and run again (~10k rows a day written and rolled back at 1 h). So always look up.
  if (known) for (const p of partitions) p.lookupAlways = true;
  const report = () => progress.report();
  const router = new LineRouter(partitions, writer, seen, gate, {
    runId: target.runId,
    batchSize,
    maxLineBytes: req.maxLineBytes,
    day: exportDayOf(target),
    contract,
    known,
    rejectsSeen,
  });
  return {
    cp,
    known,
    seen,
    rejectsSeen,
    merging: { req, first, partitions, seen, writer, router, read: progress.read, report },
  };
}

/** What one run of a load merges with: its partitions, their writer, the router feeding them. */
interface Merging {
  req: LoadRequest;
  /** The first partition's connection, which holds the load's lock (runLoad releases it). */
  first: pg.PoolClient;
  partitions: Partition[];
  seen: SeenSpill | null;
  writer: BatchWriter;
  router: LineRouter;
  read: SourceRead;
  report: () => void;
}

/**
 * Every line of the source merged and committed, or the load's first failure thrown once every
 * batch in flight has settled (and the partitions' connections are released either way).
 */
async function mergeSource(m: Merging): Promise<void> {
  const { req, first, partitions, seen, writer, router, read, report } = m;
  try {
    await seen?.reset();
    await readSource(req, router, writer, read, report);
    // Every partition ends at the last line, so the checkpoint shows the whole source merged.
    await router.verifyAll();
    if (router.reverified > 0) {
      req.log.warn(
        { reverified: router.reverified },
        'the source changed since the checkpoint: re-merged skipped lines',
      );
    }
    for (const p of partitions) await writer.send(p, read.linesRead);
    await writer.drain(partitions);
    await seen?.finish();
  } catch (err) {
    writer.failure ??= err;
    await Promise.allSettled(partitions.map((p) => p.inflight));
  } finally {
    // The first partition's connection holds the load's lock: runLoad releases it.
    const failed = writer.failure !== null && !isCrsError(writer.failure);
    for (const p of partitions) if (p.client !== first) p.client.release(failed);
  }
  if (writer.failure) {
    // Best effort: the next attempt clears them anyway, but a load never run again would leave them.
    await seen?.discard().catch(() => {});
    if (isCrsError(writer.failure)) throw writer.failure;
    // A lost connection or a timeout is retryable: run again, the load resumes at its checkpoint.
    throw toDbCrsError(writer.failure, 'LOAD_FAILED', `load ${loadIdOf(req.target)} failed`);
  }
}

const DEFAULT_REOPEN_PAUSE_MS = 250;
const REOPEN_PAUSE_CAP_MS = 5000;

/** The pause before reopen `attempt + 1`: the first pause, doubled each time, capped. */
export function reopenPause(firstMs: number, attempt: number): number {
  return Math.min(firstMs * 2 ** attempt, Math.max(REOPEN_PAUSE_CAP_MS, firstMs));
}

/**
 * Reads the source into the router, reopening it after a retryable cut (up to maxReopens): a
 * reopened stream starts again from its first line, and the lines already taken (buffered or
 * committed) are skipped once their digest shows they are the same lines (resume.ts).
 */
async function readSource(
  req: LoadRequest,
  router: LineRouter,
  writer: BatchWriter,
  read: SourceRead,
  report: () => void,
): Promise<void> {
  const digest = new LineDigest();
  const maxReopens = req.maxReopens ?? 5;
  for (let attempt = 0; ; attempt++) {
    read.reopens = attempt;
    const skipUpTo = read.linesRead;
    const prefix = digest.reread(skipUpTo);
    try {
      const stream = await req.open(attempt);
      const lineStats: SplitStats = { bytesRead: 0, linesSeen: 0, blankLines: 0 };
      for await (const lines of splitLines(stream, { maxLineBytes: req.maxLineBytes }, lineStats)) {
        if (req.signal?.aborted)
          throw new CrsError('CANCELLED', 'load cancelled', { cause: req.signal.reason });
        if (writer.failure) throw writer.failure;
        for (const line of lines) {
          if (prefix && line.lineNo <= skipUpTo) {
            prefix.add(line);
            if (line.lineNo === skipUpTo) prefix.check(line.lineNo);
            continue;
          }
          if (prefix && !prefix.checked) prefix.check(line.lineNo);
          await router.take(line, digest.take(line));
          read.linesRead = line.lineNo;
        }
        read.bytesRead = Math.max(read.bytesRead, lineStats.bytesRead);
        report();
      }
      if (prefix && !prefix.checked) prefix.check(lineStats.linesSeen);
      // Blank lines at the end still count as read.
      read.linesRead = Math.max(read.linesRead, lineStats.linesSeen);
      read.bytesRead = Math.max(read.bytesRead, lineStats.bytesRead);
      return;
    } catch (err) {
      if (
        writer.failure ||
        !isCrsError(err) ||
        !err.retryable ||
        err.code === 'CANCELLED' ||
        err.code === 'SOURCE_CHANGED' ||
        attempt >= maxReopens
      ) {
        throw err;
      }
      req.log.warn(
        { err, attempt: attempt + 1, afterLine: read.linesRead },
        'source stream failed; reopening it',
      );
      await sleep(reopenPause(req.reopenPauseMs ?? DEFAULT_REOPEN_PAUSE_MS, attempt), undefined, {
        signal: req.signal,
      });
    }
  }
}
