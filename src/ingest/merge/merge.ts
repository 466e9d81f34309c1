import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { itemAt } from '../../common/checked.ts';
import type { LoadCounts } from '../../common/counts.ts';
import { exportDayOf, type LoadTarget, loadIdOf, sourceNameOf, sourceOf } from '../../common/load-target.ts';
import { driftKey } from '../../common/schema-drift.ts';
import { mirrorDayCheckpoint } from '../../warehouse/ledger.ts';
import { marksWaitSql } from '../../warehouse/rollups/mark.ts';
import { addBatchDrift, type DriftCount } from '../../warehouse/schema-drift.ts';
import { type ExportContract, lastDrift } from '../parse/record-parser.ts';
import { type ByteSink, COPY_HEADER, COPY_TRAILER, TUPLE_COLUMNS } from './copy-binary.ts';
import {
  dayOfRaw,
  type EncodedRow,
  encodeText,
  type LineDrift,
  type PendingReject,
  type PendingRow,
  rowId,
  textReject,
} from './pending.ts';

/**
 * One batch of one key partition, merged in one transaction together with the partition's
 * checkpoint: data and checkpoint commit or roll back together, so a retried load resumes
 * exactly where the last commit left it.
 *
 * This is the loader's hot path, so it talks to `pg` directly. Rows travel as binary COPY tuples
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
}

/** A batch's counts (a part of the load's, see src/common/counts.ts) and what the loader steers by. */
export interface BatchCounts
  extends Pick<LoadCounts, 'rowsRead' | 'inserted' | 'updated' | 'unchanged' | 'rejected'> {
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

/** A day's counts in a batch: records read, inserted, updated, unchanged; lines quarantined. */
type DayCounts = [number, number, number, number, number];

const COLUMN_LIST = TUPLE_COLUMNS.join(',');
const COPY_TARGET_SQL = `copy analytics_messages (${COLUMN_LIST}) from stdin (format binary)`;
const COPY_STAGE_SQL = `copy crs_stage_messages (${COLUMN_LIST}) from stdin (format binary)`;

// Per session, emptied by every commit. Unlogged and private to the connection: a rolled-back
// batch leaves nothing in it either.
const STAGE_TABLE_SQL = `
  create temporary table if not exists crs_stage_messages (
    message_id uuid, thread_id uuid, user_id uuid, message_time timestamptz, message_date date,
    input text, response text, extra jsonb, record_hash text, _source_line bigint, _load_id text,
    line_hash text, response_chars integer
  ) on commit delete rows`;

const MERGE_STAGE_SQL =
  `insert into analytics_messages (${COLUMN_LIST}) select ${COLUMN_LIST} from crs_stage_messages ` +
  'on conflict (message_id) do update set thread_id = excluded.thread_id, user_id = excluded.user_id, ' +
  'message_time = excluded.message_time, message_date = excluded.message_date, input = excluded.input, ' +
  'response = excluded.response, extra = excluded.extra, record_hash = excluded.record_hash, ' +
  '_source_line = excluded._source_line, _load_id = excluded._load_id, line_hash = excluded.line_hash, ' +
  'response_chars = excluded.response_chars, _loaded_at = now(), _deleted_at = null';

const staged = new WeakSet<pg.ClientBase>();

const LOOKUP_SQL =
  'select message_id::text as id, record_hash as h, _deleted_at is not null as d, line_hash as lh, ' +
  'message_date::text as md from analytics_messages where message_id = any($1::uuid[])';

// Appended, not upserted: partitions touch the same threads, and an upsert would hold their row
// locks until commit (finalize.ts moves the queue into `threads` once per load).
const THREADS_SQL = `
  insert into thread_queue (thread_id, user_id, load_id)
  select t.thread_id, t.user_id, $3 from unnest($1::uuid[], $2::uuid[]) as t(thread_id, user_id)`;

// One open reject per line (its source, day and digest): a line that a later load reads again
// counts that load once (however many times it holds the line) and notes it as the last; the first
// load, line and time stay. The batch's lines go in the order of their key (writeRejects), so
// two partitions of a load holding the same lines lock their rows in one order. A batch merged
// again after a rollback writes as if for the first time, and a line an earlier attempt committed
// is never sent again (router.ts): a resumed load counts once.
const REJECTS_SQL = `
  insert into rejected_records as r (_load_id, last_load_id, source, source_name, day, line_no, raw, raw_bytes,
    raw_length, error_code, error_detail, message_id, line_digest)
  select $1, $1, $2, $3, x.day, x.line_no, x.raw, x.raw_bytes, x.raw_length, x.code, x.detail, x.message_id, x.digest
  from unnest($4::date[], $5::bigint[], $6::text[], $7::bytea[], $8::bigint[], $9::text[], $10::text[], $11::uuid[],
    $12::bytea[]) with ordinality as x(day, line_no, raw, raw_bytes, raw_length, code, detail, message_id, digest, n)
  order by x.n
  on conflict (source, coalesce(day, 'infinity'::date), line_digest) where line_digest is not null and replayed_at is null
  do update set times_seen = r.times_seen + (r.last_load_id is distinct from excluded.last_load_id)::int,
    last_load_id = excluded.last_load_id, last_seen_at = now(), error_code = excluded.error_code,
    error_detail = excluded.error_detail`;

// A replay's rejects: rows of its load alone, removed once the replay has noted them (replay.ts).
const REJECTS_PER_LOAD_SQL = `
  insert into rejected_records (_load_id, source, source_name, day, line_no, raw, raw_bytes, raw_length, error_code, error_detail, message_id)
  select $1, $2, $3, r.day, r.line_no, r.raw, r.raw_bytes, r.raw_length, r.code, r.detail, r.message_id
  from unnest($4::date[], $5::bigint[], $6::text[], $7::bytea[], $8::bigint[], $9::text[], $10::text[], $11::uuid[])
    as r(day, line_no, raw, raw_bytes, raw_length, code, detail, message_id)
  on conflict (_load_id, source, coalesce(source_name, ''), line_no) where line_no is not null do nothing`;

const CHECKPOINT_SQL = `
  update load_checkpoints set lines_committed = $3, rows_read = rows_read + $4, rows_inserted = rows_inserted + $5,
    rows_updated = rows_updated + $6, rows_unchanged = rows_unchanged + $7, rows_rejected = rows_rejected + $8,
    updated_at = now()
  where load_key = $1 and part = $2`;

const DAY_COUNTS_SQL = `
  insert into load_day_counts (load_key, part, day, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected)
  select $1, $2, d.day, d.r, d.i, d.u, d.n, d.j
  from unnest($3::date[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[]) as d(day, r, i, u, n, j)
  on conflict (load_key, part, day) do update set rows_read = load_day_counts.rows_read + excluded.rows_read,
    rows_inserted = load_day_counts.rows_inserted + excluded.rows_inserted,
    rows_updated = load_day_counts.rows_updated + excluded.rows_updated,
    rows_unchanged = load_day_counts.rows_unchanged + excluded.rows_unchanged,
    rows_rejected = load_day_counts.rows_rejected + excluded.rows_rejected`;

function dayCounts(days: BatchCounts['days'], day: string): DayCounts {
  let c = days.get(day);
  if (!c) {
    c = [0, 0, 0, 0, 0];
    days.set(day, c);
  }
  return c;
}

function bump(days: BatchCounts['days'], day: string, slot: 1 | 2 | 3): void {
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
    fastTries: 0,
    fastHits: 0,
    days: new Map(),
    threadIds: [],
    found: null,
  };
  // Lines quarantined here are added to a copy: a retried batch starts from the same list.
  const quarantined = rejects.slice();
  const day = exportDayOf(t.target);
  await client.query(day ? `begin; ${marksWaitSql(day)}` : 'begin');
  try {
    const state = new Map<string, KeyState>();
    const stored = new Set<string>();
    if (rows.length > 0 && !t.skipLookup) {
      const found = await client.query<{ id: string; h: string; d: boolean; lh: string | null; md: string }>({
        name: 'crs_lookup',
        text: LOOKUP_SQL,
        values: [rows.map(rowId)],
      });
      for (const f of found.rows) {
        state.set(f.id, { recordHash: f.h, deleted: f.d, lineHash: f.lh, messageDate: f.md });
        stored.add(f.id);
      }
      counts.found = found.rows.length;
    }
    if (t.known) {
      if (!day) throw new Error('lines known by content are counted on the day they were read from');
      countKnown(counts, t.known, day);
    }
    const finalVersion = decide(rows, state, t, counts, quarantined);
    if (finalVersion.size > 0) await writeRows(client, rows, finalVersion, stored, t, counts);
    await writeBookkeeping(client, quarantined, t, counts);
    await client.query('commit');
    return counts;
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  }
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
      t.onSeen?.(row.messageId, row.messageDate);
    } else row = pending;
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
  if (direct.length > 0) await copyTuples(client, COPY_TARGET_SQL, t.sink, direct);
  if (stage.length > 0) {
    if (!staged.has(client)) {
      await client.query(STAGE_TABLE_SQL);
      staged.add(client);
    }
    await copyTuples(client, COPY_STAGE_SQL, t.sink, stage);
    await client.query({ name: 'crs_merge_stage', text: MERGE_STAGE_SQL });
  }
  if (threads.size > 0) {
    counts.threadIds = [...threads.keys()];
    await client.query({
      name: 'crs_threads',
      text: THREADS_SQL,
      values: [counts.threadIds, [...threads.values()], t.target.runId],
    });
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
  await client.query({
    name: 'crs_checkpoint',
    text: CHECKPOINT_SQL,
    values: [
      loadId,
      t.part,
      t.uptoLine,
      counts.rowsRead,
      counts.inserted,
      counts.updated,
      counts.unchanged,
      counts.rejected,
    ],
  });
  if (counts.days.size > 0) {
    const days = [...counts.days.entries()];
    await client.query({
      name: 'crs_day_counts',
      text: DAY_COUNTS_SQL,
      values: [
        loadId,
        t.part,
        days.map((d) => d[0]),
        days.map((d) => d[1][0]),
        days.map((d) => d[1][1]),
        days.map((d) => d[1][2]),
        days.map((d) => d[1][3]),
        days.map((d) => d[1][4]),
      ],
    });
  }
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
  const values: unknown[] = [
    t.target.runId,
    sourceOf(t.target),
    sourceNameOf(t.target),
    rejects.map((r) => r.day),
    rejects.map((r) => r.lineNo),
    rejects.map((r) => r.raw),
    rejects.map((r) => r.rawBytes),
    rejects.map((r) => r.rawLength),
    rejects.map((r) => r.code),
    rejects.map((r) => r.detail),
    rejects.map((r) => r.messageId),
  ];
  if (t.rejectsPerLoad) {
    await client.query({ name: 'crs_rejects_per_load', text: REJECTS_PER_LOAD_SQL, values });
    return;
  }
  values.push(rejects.map((r) => r.digest));
  await client.query({ name: 'crs_rejects', text: REJECTS_SQL, values });
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
  const enc = encodeText(text, t.sink, row.lineNo, t.target.runId, row.lineHash);
  if (!enc.ok) throw new Error(`line ${row.lineNo} was loaded before but no longer parses: ${enc.detail}`);
  rows[i] = enc.row;
  return enc.row;
}

/** Sends the rows' tuples (in row order) as one binary COPY; adjacent tuples go as one piece. */
async function copyTuples(
  client: pg.PoolClient,
  text: string,
  sink: ByteSink,
  rows: EncodedRow[],
): Promise<void> {
  const stream = client.query(copyFrom(text));
  const done = new Promise<void>((resolve, reject) => {
    stream.on('finish', resolve);
    stream.on('error', reject);
  });
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
  await done;
}
