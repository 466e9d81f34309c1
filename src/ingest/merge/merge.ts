import type pg from 'pg';
import { itemAt } from '../../common/checked.ts';
import type { LoadCounts } from '../../common/counts.ts';
import { exportDayOf, type LoadTarget, loadIdOf, sourceNameOf, sourceOf } from '../../common/load-target.ts';
import { driftKey } from '../../common/schema-drift.ts';
import { mirrorDayCheckpoint } from '../../warehouse/ledger.ts';
import {
  type CopyInput,
  copyNewRows,
  lookupStoredKeys,
  mergeStagedRows,
  quarantineLines,
  quarantineLinesOfLoad,
  queueThreads,
} from '../../warehouse/load/batch.ts';
import { addDayCounts, advanceCheckpoint, type DayCounts } from '../../warehouse/load/checkpoints.ts';
import { beginLoad, commitLoad, rollbackLoad } from '../../warehouse/load/transaction.ts';
import { uuidsIn } from '../../warehouse/privacy/keyed-id.ts';
import { clearLoadedText } from '../../warehouse/privacy/retention.ts';
import { Suppression } from '../../warehouse/privacy/suppression.ts';
import { addBatchDrift, type DriftCount } from '../../warehouse/schema-drift.ts';
import { type ExportContract, exportContract, lastDrift } from '../parse/record-parser.ts';
import { type ByteSink, COPY_HEADER, COPY_TRAILER } from './copy-binary.ts';
import {
  dayOfRaw,
  type EncodedRow,
  encodeText,
  type LineDrift,
  type PendingReject,
  type PendingRow,
  type RowKey,
  rowId,
  textReject,
} from './pending.ts';

/**
 * One batch of one key partition, merged in one transaction together with the partition's
 * checkpoint: data and checkpoint commit or roll back together, so a retried load resumes
 * exactly where the last commit left it.
 *
 * The loader's hot path: its statements (src/warehouse/load/batch.ts, checkpoints.ts) run on the
 * partition's own `pg` client, as named statements. Rows travel as binary COPY tuples
 * (copy-binary.ts), encoded as the lines are parsed: new keys are copied straight into
 * `analytics_messages`; changed keys are copied into a temporary table and merged from there with
 * one INSERT ... ON CONFLICT. Against the multi-row parameterised upsert this replaced, binary COPY
 * halved the loader's own CPU per row and cut the server's by a quarter (bench/README.md).
 */

export interface BatchTarget {
  /**
   * The load (load-target.ts): its load id keys the checkpoint, its run id is each row's
   * `_load_id`, its source names the quarantine's rows. A day load's export day is the sync_days
   * row whose lines_committed mirrors the checkpoint, and the day whose writes' rollup marks wait
   * for the pull's finalize instead of marking the day (src/warehouse/rollups/mark.ts
   * `marksWaitSql`), so readers go on reading the day from its rollups, as the last pull of it
   * left them, while this one loads. A file import marks as it writes.
   */
  target: LoadTarget;
  part: number;
  /** Every line of this partition up to here is in the batch or committed before it. */
  uptoLine: number;
  /** Where the batch's tuples are (and where rows parsed here are encoded). */
  sink: ByteSink;
  /** What a record must look like (CRS_RECORD_CONTRACT, and the drift accepted). */
  contract: ExportContract;
  /**
   * The batch's schema drift by line, counted with its checkpoint. Lines parsed here (the fast
   * path's) are added to it: a retry finds them already there, or parses them again into the
   * same line numbers.
   */
  drift: Map<number, LineDrift>;
  /**
   * Lines of the batch known by content (known-lines.ts): each the line of a live row of the
   * open day, byte for byte, so read and unchanged; only counted.
   */
  known?: number;
  /**
   * Send every written row through the staging table's upsert, new keys too: the retry after a
   * concurrent writer inserted one of the batch's new keys first (unique violation).
   */
  stageAll?: boolean;
  /**
   * Take every key of the batch as new without looking it up: set while this partition's last
   * lookup found none of its batch's keys (a first load, where the lookup is ~5 % of the server's
   * time and finds nothing). A key that is stored after all makes the COPY fail on the primary
   * key (nothing is written), and the batch is merged again with the lookup (batch-writer.ts),
   * so the outcome and the counts are those of the lookup's path.
   */
  skipLookup?: boolean;
  /**
   * Threads this load has queued in batches already committed: not appended again. The queue is
   * read as a set (finalize.ts), so this only saves rows: ~40 messages per thread meant nearly a
   * queue row for every message row.
   */
  queuedThreads?: ReadonlySet<string>;
  /** Called with the id and UTC date of every fast-path record of the batch. */
  onSeen?: ((id: string, day: string) => void) | undefined;
  /**
   * Called with every reject the merge finds (a fast-path line that does not parse), again if the
   * batch is merged again: what the load's finalize must know of its quarantined lines (rejects-seen.ts).
   */
  onReject?: ((rej: PendingReject) => void) | undefined;
  /**
   * Quarantine the batch's rejects as rows of this load alone (unique per load and line number),
   * not as the one open reject of each line: `rejects replay`, whose lines that fail again are
   * reported against the rejects they came from and then removed (replay.ts).
   */
  rejectsPerLoad?: boolean;
  /** CRS_TEXT_RETENTION_DAYS: rows written of days before this one lose their text in the batch's transaction. */
  textBefore?: string;
}

/** A batch's counts (a part of the load's, see src/common/counts.ts) and what the loader steers by. */
export interface BatchCounts
  extends Pick<LoadCounts, 'rowsRead' | 'inserted' | 'updated' | 'unchanged' | 'rejected' | 'suppressed'> {
  /** Fast-path lines of the batch, and how many of them were unchanged without parsing. */
  fastTries: number;
  fastHits: number;
  /** Per UTC day of the records: read, inserted, updated, unchanged; and lines quarantined (with a day). */
  days: Map<string, DayCounts>;
  /** Threads appended to the queue by this batch (once it has committed). */
  threadIds: string[];
  /** How many of the batch's keys the lookup found stored; null when there was no lookup. */
  found: number | null;
}

function dayCounts(days: BatchCounts['days'], day: string): DayCounts {
  let c = days.get(day);
  if (!c) {
    c = [0, 0, 0, 0, 0, 0];
    days.set(day, c);
  }
  return c;
}

function bump(days: BatchCounts['days'], day: string, slot: 1 | 2 | 3 | 5): void {
  const c = dayCounts(days, day);
  c[0]++;
  c[slot]++;
}

/** Lines known by content: read and unchanged, on the day whose rows they were read from. */
function countKnown(counts: BatchCounts, known: number, day: string): void {
  counts.rowsRead += known;
  counts.unchanged += known;
  const c = dayCounts(counts.days, day);
  c[0] += known;
  c[3] += known;
}

/**
 * What the warehouse holds for a key, as far as this batch knows: the stored row, then the last
 * row of the batch that applied to it (the row itself: no object per row for this).
 */
interface KeyState {
  recordHash: string;
  deleted?: boolean;
  lineHash: string | null;
  messageDate: string;
}

/**
 * One batch in one transaction: decides what each row does (`decide`), writes the final version of
 * each changed key (`writeRows`), then the rejects, the checkpoint and the per-day counts
 * (`writeBookkeeping`). A retry passes the same `rows`: rows encoded here are put back into it, so
 * they are not parsed again.
 */
export async function mergeBatch(
  client: pg.PoolClient,
  rows: PendingRow[],
  rejects: PendingReject[],
  t: BatchTarget,
): Promise<BatchCounts> {
  const counts: BatchCounts = {
    rowsRead: 0,
    inserted: 0,
    updated: 0,
    unchanged: 0,
    rejected: 0,
    suppressed: 0,
    fastTries: 0,
    fastHits: 0,
    days: new Map(),
    threadIds: [],
    found: null,
  };
  // Lines quarantined here are added to a copy: a retried batch starts from the same list.
  const quarantined = rejects.slice();
  const day = exportDayOf(t.target);
  await beginLoad(client, day);
  try {
    const state = new Map<string, KeyState>();
    const stored = new Set<string>();
    if (rows.length > 0 && !t.skipLookup) {
      const found = await lookupStoredKeys(client, rows.map(rowId));
      for (const f of found) {
        state.set(f.id, { recordHash: f.h, deleted: f.d, lineHash: f.lh, messageDate: f.md });
        stored.add(f.id);
      }
      counts.found = found.length;
    }
    if (t.known) {
      if (!day) throw new Error('lines known by content are counted on the day they were read from');
      countKnown(counts, t.known, day);
    }
    const suppression = await suppressionIn(client);
    const finalVersion = decide(rows, state, t, counts, quarantined, suppression);
    if (finalVersion.size > 0) await writeRows(client, rows, finalVersion, stored, t, counts);
    const rejects = storedUserIdsOf(quarantined, t.contract.storedUserId);
    await writeBookkeeping(client, dropSuppressed(rejects, suppression, counts), t, counts);
    await commitLoad(client);
    return counts;
  } catch (err) {
    await rollbackLoad(client);
    throw err;
  }
}

// Per connection: the list is read again (one short statement) only when an erasure was added.
const suppressionOf = new WeakMap<pg.ClientBase, Suppression>();

/**
 * The erased users and threads (`crs-sync forget`), read in the batch's transaction under the
 * suppression list's SHARE lock, held to the commit: an erasure either committed before (its ids
 * are in the list read here) or waits for this batch and then erases what it wrote
 * (src/warehouse/privacy/suppression.ts).
 */
async function suppressionIn(client: pg.PoolClient): Promise<Suppression> {
  const s = await Suppression.read(client, suppressionOf.get(client));
  suppressionOf.set(client, s);
  return s;
}

/**
 * Whether a record is of an erased user or thread: then it is counted read and suppressed, and
 * goes no further (no row, no thread queued, not seen by the delete step: the warehouse holds
 * none of it).
 */
function suppressed(row: RowKey, suppression: Suppression, counts: BatchCounts): boolean {
  if (suppression.empty || !suppression.drops(row.userId, row.threadId)) return false;
  counts.rowsRead++;
  counts.suppressed++;
  bump(counts.days, row.messageDate, 5);
  return true;
}

/**
 * The rejects with their user ids as the warehouse stores them (CRS_USER_ID_POLICY): so the
 * suppression list and `crs-sync forget` know them. New objects: a batch retried after a rollback
 * reads the same rejects again.
 */
function storedUserIdsOf(
  rejects: PendingReject[],
  stored: ((userId: string) => string) | undefined,
): PendingReject[] {
  if (!stored) return rejects;
  return rejects.map((r) => (r.userId === null ? r : { ...r, userId: stored(r.userId) }));
}

/**
 * The batch's rejects without those whose line names an erased user or thread anywhere in its
 * text, plainly or with JSON escapes (a line is quarantined before its fields are known to be
 * what they claim), or, for an over-long line, in the ids read from the whole line beyond its
 * kept prefix: those are read and suppressed, never written to the quarantine.
 */
function dropSuppressed(
  rejects: PendingReject[],
  suppression: Suppression,
  counts: BatchCounts,
): PendingReject[] {
  if (suppression.empty || rejects.length === 0) return rejects;
  const drop = (r: PendingReject): boolean => {
    if (suppression.drops(r.userId, r.threadId)) return true;
    const text = r.rawBytes ? r.rawBytes.toString('latin1') : r.raw;
    for (const id of uuidsIn(text)) {
      if (suppression.has('user', id) || suppression.has('thread', id)) return true;
    }
    return false;
  };
  return rejects.filter((r) => {
    if (!drop(r)) return true;
    counts.rowsRead++;
    counts.suppressed++;
    if (r.day !== null) bump(counts.days, r.day, 5);
    return false;
  });
}

/**
 * Decides, row by row in line order, what each record does to the warehouse (insert, update,
 * nothing), as if the lines were applied one at a time; returns, per changed key, the index in
 * `rows` of its final version. A key twice in a batch is therefore legal (the later line wins)
 * and counts the same as it would spread over two batches.
 */
function decide(
  rows: PendingRow[],
  state: Map<string, KeyState>,
  t: BatchTarget,
  counts: BatchCounts,
  quarantined: PendingReject[],
  suppression: Suppression,
): Map<string, number> {
  const finalVersion = new Map<string, number>();
  for (let i = 0; i < rows.length; i++) {
    const pending = itemAt(rows, i);
    let row: Exclude<PendingRow, { kind: 'raw' }>;
    if (pending.kind === 'raw') {
      // Fast path: the same bytes as the stored row's line (and nothing changed the key since
      // in this batch) is unchanged without parsing.
      const cur = state.get(pending.quickId);
      counts.fastTries++;
      if (cur && !cur.deleted && cur.lineHash === pending.lineHash) {
        counts.fastHits++;
        counts.rowsRead++;
        counts.unchanged++;
        bump(counts.days, cur.messageDate, 3);
        t.onSeen?.(pending.quickId, cur.messageDate);
        if (finalVersion.has(pending.quickId)) finalVersion.set(pending.quickId, i);
        continue;
      }
      const text = t.sink.buf.toString('utf8', pending.rawAt, pending.rawEnd);
      const enc = encodeText(text, t.sink, pending.lineNo, t.target.runId, pending.lineHash, t.contract);
      const notes = lastDrift();
      // As the router: drift of a line that loads, or is held for it (`schema_drift`).
      if (notes.length > 0 && (enc.ok || enc.code === 'schema_drift')) {
        const day = enc.ok ? enc.row.messageDate : (exportDayOf(t.target) ?? dayOfRaw(text));
        t.drift.set(pending.lineNo, { day, notes: notes.slice() });
      }
      if (!enc.ok) {
        const day = exportDayOf(t.target) ?? dayOfRaw(text);
        const rej = textReject(pending.lineNo, enc, text, t.sink.view(pending.rawAt, pending.rawEnd), day);
        quarantined.push(rej);
        t.onReject?.(rej);
        continue;
      }
      row = enc.row;
      rows[i] = row;
      if (suppressed(row, suppression, counts)) continue;
      t.onSeen?.(row.messageId, row.messageDate);
    } else {
      row = pending;
      if (suppressed(row, suppression, counts)) continue;
    }
    const cur = state.get(row.messageId);
    counts.rowsRead++;
    if (!cur) {
      counts.inserted++;
      bump(counts.days, row.messageDate, 1);
      finalVersion.set(row.messageId, i);
    } else if (cur.recordHash !== row.recordHash || cur.deleted) {
      counts.updated++;
      bump(counts.days, row.messageDate, 2);
      finalVersion.set(row.messageId, i);
    } else {
      counts.unchanged++;
      bump(counts.days, row.messageDate, 3);
      // An earlier line of this batch may have changed the key; this line restores the stored
      // version, which is what must be written then.
      if (finalVersion.has(row.messageId)) finalVersion.set(row.messageId, i);
    }
    state.set(row.messageId, row);
  }
  return finalVersion;
}

/** The final versions into the table (new keys by COPY, stored ones through the stage), and their threads. */
async function writeRows(
  client: pg.PoolClient,
  rows: PendingRow[],
  finalVersion: Map<string, number>,
  stored: ReadonlySet<string>,
  t: BatchTarget,
  counts: BatchCounts,
): Promise<void> {
  const direct: EncodedRow[] = [];
  const stage: EncodedRow[] = [];
  // Threads whose messages changed are queued for enrichment (see finalize.ts).
  const threads = new Map<string, string>();
  for (const i of finalVersion.values()) {
    const row = encodedAt(rows, i, t);
    (t.stageAll || stored.has(row.messageId) ? stage : direct).push(row);
    if (!t.queuedThreads?.has(row.threadId)) threads.set(row.threadId, row.userId);
  }
  if (direct.length > 0) await copyNewRows(client, (input) => writeTuples(input, t.sink, direct));
  if (stage.length > 0) await mergeStagedRows(client, (input) => writeTuples(input, t.sink, stage));
  const before = t.textBefore;
  if (before !== undefined) {
    const old = [...direct, ...stage].filter((r) => r.messageDate < before).map((r) => r.messageId);
    if (old.length > 0) await clearLoadedText(client, old, before);
  }
  if (threads.size > 0) {
    counts.threadIds = [...threads.keys()];
    await queueThreads(client, counts.threadIds, [...threads.values()], t.target.runId);
  }
}

/** The batch's rejects, the partition's checkpoint, the per-day counts and the ledger's mirror of them. */
async function writeBookkeeping(
  client: pg.PoolClient,
  rejects: PendingReject[],
  t: BatchTarget,
  counts: BatchCounts,
): Promise<void> {
  const loadId = loadIdOf(t.target);
  if (rejects.length > 0) {
    counts.rowsRead += rejects.length;
    counts.rejected += rejects.length;
    for (const r of rejects) if (r.day !== null) dayCounts(counts.days, r.day)[4]++;
    await writeRejects(client, rejects, t);
  }
  await advanceCheckpoint(client, loadId, t.part, t.uptoLine, counts);
  if (counts.days.size > 0) await addDayCounts(client, loadId, t.part, [...counts.days.entries()]);
  const day = exportDayOf(t.target);
  if (day) await mirrorDayCheckpoint(client, loadId, day);
  if (t.drift.size > 0) await addBatchDrift(client, loadId, t.part, driftCounts(t.drift));
}

/**
 * The batch's rejects into the quarantine: one row per line and day (a line twice in the batch is
 * one line), in the order of their key; or, for a replay, a row per line of the load.
 */
async function writeRejects(client: pg.PoolClient, all: PendingReject[], t: BatchTarget): Promise<void> {
  let rejects = all;
  if (!t.rejectsPerLoad) {
    const lines = new Map<string, PendingReject>();
    for (const r of all) {
      const key = `${r.day ?? ''}\u0000${r.digest.toString('hex')}`;
      if (!lines.has(key)) lines.set(key, r);
    }
    rejects = [...lines.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map((e) => e[1]);
  }
  const origin = { runId: t.target.runId, source: sourceOf(t.target), sourceName: sourceNameOf(t.target) };
  if (t.rejectsPerLoad) {
    await quarantineLinesOfLoad(client, origin, rejects);
    return;
  }
  await quarantineLines(client, origin, rejects);
}

/** A batch's drift by line as counts per drift and day (the first line's example kept). */
function driftCounts(drift: Map<number, LineDrift>): DriftCount[] {
  const out = new Map<string, DriftCount>();
  for (const { day, notes } of drift.values()) {
    for (const note of notes) {
      const k = `${driftKey(note)}\u0000${day ?? ''}`;
      const had = out.get(k);
      if (had) had.count++;
      else out.set(k, { note, scope: day ?? '', day, count: 1 });
    }
  }
  return [...out.values()];
}

/**
 * The row at `i`, encoded if it has no tuple yet (and put back encoded): a fast-path row chosen as
 * a key's final version without being parsed (it restores the stored row after an earlier line of
 * the batch changed the key, so its bytes equal the stored row's line and it parses), or a
 * re-checked line of a resumed load.
 */
function encodedAt(rows: PendingRow[], i: number, t: BatchTarget): EncodedRow {
  const row = itemAt(rows, i);
  if (row.kind === 'encoded') return row;
  const text = row.kind === 'raw' ? t.sink.buf.toString('utf8', row.rawAt, row.rawEnd) : row.text;
  // The default contract (a line that loaded once is not held for drift now), but the load's
  // user ids: the row is stored as every other row of the load.
  const contract = t.contract.storedUserId
    ? exportContract({ storedUserId: t.contract.storedUserId })
    : undefined;
  const enc = encodeText(text, t.sink, row.lineNo, t.target.runId, row.lineHash, contract);
  if (!enc.ok) throw new Error(`line ${row.lineNo} was loaded before but no longer parses: ${enc.detail}`);
  rows[i] = enc.row;
  return enc.row;
}

/** Writes the rows' tuples (in row order) as one binary COPY's input; adjacent tuples go as one piece. */
function writeTuples(stream: CopyInput, sink: ByteSink, rows: EncodedRow[]): void {
  stream.write(COPY_HEADER);
  let from = -1;
  let to = -1;
  for (const r of rows) {
    if (r.at === to) {
      to = r.end;
      continue;
    }
    if (from >= 0) stream.write(sink.view(from, to));
    from = r.at;
    to = r.end;
  }
  if (from >= 0) stream.write(sink.view(from, to));
  stream.end(COPY_TRAILER);
}
