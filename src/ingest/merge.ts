import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { type ByteSink, COPY_HEADER, COPY_TRAILER, putMessageTuple, TUPLE_COLUMNS } from './copy-binary.ts';
import { type ExportRecord, parseRecord } from './record-parser.ts';

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

/** What the merge decides on; the rest of a parsed record lives only in its encoded tuple. */
export type RowKey = Pick<ExportRecord, 'messageId' | 'threadId' | 'userId' | 'messageDate' | 'recordHash'>;

/**
 * A line on its way to the warehouse: parsed already (`record`, with its tuple at `at`..`end` of
 * the batch's sink), or, on the fast path, only its bytes (at `rawAt`..`rawEnd` of the sink), its
 * message id as read from them and their sha1: parsed here only when the warehouse does not hold
 * a row loaded from exactly these bytes. A parsed row without a tuple (a re-checked line of a
 * resumed load) keeps its text and is encoded here if it is written.
 */
export interface PendingRow {
  lineNo: number;
  lineHash: string;
  record?: RowKey;
  at?: number;
  end?: number;
  text?: string;
  quickId?: string;
  rawAt?: number;
  rawEnd?: number;
}

/** The key fields of a record, so that the record itself (its texts) can be dropped. */
export function rowKey(r: ExportRecord): RowKey {
  return {
    messageId: r.messageId,
    threadId: r.threadId,
    userId: r.userId,
    messageDate: r.messageDate,
    recordHash: r.recordHash,
  };
}

export interface PendingReject {
  lineNo: number;
  code: string;
  detail: string;
  raw: string;
  rawBytes: Buffer | null;
  rawLength: number;
  day: string | null;
}

export interface BatchTarget {
  loadId: string;
  loadKey: string;
  part: number;
  /** Every line of this partition up to here is in the batch or committed before it. */
  uptoLine: number;
  source: 'export' | 'file';
  sourceName: string;
  /** The sync_days row whose lines_committed mirrors this load's checkpoint (export day loads). */
  ledgerDay: string | null;
  /** Where the batch's tuples are (and where rows parsed here are encoded). */
  sink: ByteSink;
  /**
   * Send every written row through the staging table's upsert, new keys too: the retry after a
   * concurrent writer inserted one of the batch's new keys first (unique violation).
   */
  stageAll?: boolean;
  /**
   * Threads this load has queued in batches already committed: not appended again. The queue is
   * read as a set (finalize.ts), so this only saves rows: ~40 messages per thread meant nearly a
   * queue row for every message row.
   */
  queuedThreads?: ReadonlySet<string>;
  /** Called with the id and UTC date of every fast-path record of the batch. */
  onSeen?: ((id: string, day: string) => void) | undefined;
  /** The day of a line quarantined here (fast-path lines that fail to parse). */
  rejectDay: (text: string) => string | null;
}

export interface BatchCounts {
  read: number;
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
  /** Fast-path lines of the batch, and how many of them were unchanged without parsing. */
  fastTries: number;
  fastHits: number;
  /** Per UTC day of the records: read, inserted, updated, unchanged. */
  days: Map<string, [number, number, number, number]>;
  /** Threads appended to the queue by this batch (once it has committed). */
  threadsQueued: string[];
}

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

const REJECTS_SQL = `
  insert into rejected_records (_load_id, source, source_name, day, line_no, raw, raw_bytes, raw_length, error_code, error_detail)
  select $1, $2, $3, r.day, r.line_no, r.raw, r.raw_bytes, r.raw_length, r.code, r.detail
  from unnest($4::date[], $5::bigint[], $6::text[], $7::bytea[], $8::bigint[], $9::text[], $10::text[])
    as r(day, line_no, raw, raw_bytes, raw_length, code, detail)
  on conflict (_load_id, source, coalesce(source_name, ''), line_no) where line_no is not null do nothing`;

const CHECKPOINT_SQL = `
  update load_checkpoints set lines_committed = $3, rows_read = rows_read + $4, rows_inserted = rows_inserted + $5,
    rows_updated = rows_updated + $6, rows_unchanged = rows_unchanged + $7, rows_rejected = rows_rejected + $8,
    updated_at = now()
  where load_key = $1 and part = $2`;

const DAY_COUNTS_SQL = `
  insert into load_day_counts (load_key, part, day, rows_read, rows_inserted, rows_updated, rows_unchanged)
  select $1, $2, d.day, d.r, d.i, d.u, d.n
  from unnest($3::date[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) as d(day, r, i, u, n)
  on conflict (load_key, part, day) do update set rows_read = load_day_counts.rows_read + excluded.rows_read,
    rows_inserted = load_day_counts.rows_inserted + excluded.rows_inserted,
    rows_updated = load_day_counts.rows_updated + excluded.rows_updated,
    rows_unchanged = load_day_counts.rows_unchanged + excluded.rows_unchanged`;

const LEDGER_DAY_SQL = `
  update sync_days set lines_committed = (select min(lines_committed) from load_checkpoints where load_key = $1)
  where day = $2`;

function bump(days: BatchCounts['days'], day: string, slot: 1 | 2 | 3): void {
  let c = days.get(day);
  if (!c) {
    c = [0, 0, 0, 0];
    days.set(day, c);
  }
  c[0]++;
  c[slot]++;
}

/**
 * Decides, row by row in line order, what each record does to the warehouse (insert, update,
 * nothing), as if the lines were applied one at a time; then writes only the final version of
 * each changed key. A key twice in a batch is therefore legal (the later line wins) and counts
 * the same as it would spread over two batches.
 */
export async function mergeBatch(
  client: pg.PoolClient,
  rows: PendingRow[],
  rejects: PendingReject[],
  t: BatchTarget,
): Promise<BatchCounts> {
  const counts: BatchCounts = {
    read: 0,
    inserted: 0,
    updated: 0,
    unchanged: 0,
    rejected: 0,
    fastTries: 0,
    fastHits: 0,
    days: new Map(),
    threadsQueued: [],
  };
  // Lines quarantined here are added to a copy: a retried batch starts from the same list.
  rejects = rejects.slice();
  await client.query('begin');
  try {
    const state = new Map<string, { hash: string; deleted: boolean; lineHash: string | null; day: string }>();
    const stored = new Set<string>();
    if (rows.length > 0) {
      const ids = rows.map((r) => r.record?.messageId ?? r.quickId!);
      const found = await client.query<{ id: string; h: string; d: boolean; lh: string | null; md: string }>({
        name: 'crs_lookup',
        text: LOOKUP_SQL,
        values: [ids],
      });
      for (const f of found.rows) {
        state.set(f.id, { hash: f.h, deleted: f.d, lineHash: f.lh, day: f.md });
        stored.add(f.id);
      }
    }
    const finalVersion = new Map<string, PendingRow>();
    for (const row of rows) {
      if (!row.record) {
        // Fast path: the same bytes as the stored row's line (and nothing changed the key since
        // in this batch) is unchanged without parsing.
        const cur = state.get(row.quickId!);
        counts.fastTries++;
        if (cur && !cur.deleted && cur.lineHash === row.lineHash) {
          counts.fastHits++;
          counts.read++;
          counts.unchanged++;
          bump(counts.days, cur.day, 3);
          t.onSeen?.(row.quickId!, cur.day);
          if (finalVersion.has(row.quickId!)) finalVersion.set(row.quickId!, row);
          continue;
        }
        const text = rowText(row, t.sink);
        const parsed = parseRecord(text, { hash: false });
        if (!parsed.ok) {
          rejects.push({
            lineNo: row.lineNo,
            code: parsed.code,
            detail: parsed.detail,
            raw: text,
            rawBytes: null,
            rawLength: Buffer.byteLength(text),
            day: t.rejectDay(text),
          });
          continue;
        }
        row.at = putMessageTuple(t.sink, parsed.record, row.lineNo, t.loadId, row.lineHash);
        row.end = t.sink.len;
        row.record = rowKey(parsed.record);
        row.text = undefined;
        t.onSeen?.(parsed.record.messageId, parsed.record.messageDate);
      }
      const r = row.record;
      const cur = state.get(r.messageId);
      counts.read++;
      if (!cur) {
        counts.inserted++;
        bump(counts.days, r.messageDate, 1);
        finalVersion.set(r.messageId, row);
      } else if (cur.hash !== r.recordHash || cur.deleted) {
        counts.updated++;
        bump(counts.days, r.messageDate, 2);
        finalVersion.set(r.messageId, row);
      } else {
        counts.unchanged++;
        bump(counts.days, r.messageDate, 3);
        // An earlier line of this batch may have changed the key; this line restores the stored
        // version, which is what must be written then.
        if (finalVersion.has(r.messageId)) finalVersion.set(r.messageId, row);
      }
      state.set(r.messageId, {
        hash: r.recordHash,
        deleted: false,
        lineHash: row.lineHash,
        day: r.messageDate,
      });
    }

    if (finalVersion.size > 0) {
      const write = [...finalVersion.values()];
      // New keys go straight into the table; keys the warehouse holds are merged via the stage.
      const direct: PendingRow[] = [];
      const stage: PendingRow[] = [];
      for (const row of write) {
        if (row.at === undefined) encode(row, t);
        (t.stageAll || stored.has(row.record!.messageId) ? stage : direct).push(row);
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

      // Threads whose messages changed are queued for enrichment (see finalize.ts).
      const threads = new Map<string, string>();
      for (const row of write) {
        const r = row.record!;
        if (!t.queuedThreads?.has(r.threadId)) threads.set(r.threadId, r.userId);
      }
      if (threads.size > 0) {
        counts.threadsQueued = [...threads.keys()];
        await client.query({
          name: 'crs_threads',
          text: THREADS_SQL,
          values: [counts.threadsQueued, [...threads.values()], t.loadId],
        });
      }
    }

    if (rejects.length > 0) {
      counts.read += rejects.length;
      counts.rejected += rejects.length;
      await client.query({
        name: 'crs_rejects',
        text: REJECTS_SQL,
        values: [
          t.loadId,
          t.source,
          t.sourceName,
          rejects.map((r) => r.day),
          rejects.map((r) => r.lineNo),
          rejects.map((r) => r.raw),
          rejects.map((r) => r.rawBytes),
          rejects.map((r) => r.rawLength),
          rejects.map((r) => r.code),
          rejects.map((r) => r.detail),
        ],
      });
    }

    await client.query({
      name: 'crs_checkpoint',
      text: CHECKPOINT_SQL,
      values: [
        t.loadKey,
        t.part,
        t.uptoLine,
        counts.read,
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
          t.loadKey,
          t.part,
          days.map((d) => d[0]),
          days.map((d) => d[1][0]),
          days.map((d) => d[1][1]),
          days.map((d) => d[1][2]),
          days.map((d) => d[1][3]),
        ],
      });
    }
    if (t.ledgerDay) {
      await client.query({ name: 'crs_ledger_day', text: LEDGER_DAY_SQL, values: [t.loadKey, t.ledgerDay] });
    }
    await client.query('commit');
    return counts;
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  }
}

/**
 * Encodes a row chosen to be written that has no tuple yet: a fast-path row chosen as a key's
 * final version without being parsed (it restores the stored row after an earlier line of the
 * batch changed the key, so its bytes equal the stored row's line and it parses), or a re-checked
 * line of a resumed load.
 */
function encode(row: PendingRow, t: BatchTarget): void {
  const p = parseRecord(rowText(row, t.sink), { hash: false });
  if (!p.ok) throw new Error(`line ${row.lineNo} was loaded before but no longer parses: ${p.detail}`);
  row.at = putMessageTuple(t.sink, p.record, row.lineNo, t.loadId, row.lineHash);
  row.end = t.sink.len;
  row.record = rowKey(p.record);
  row.text = undefined;
}

/** The source line of an unparsed row: its bytes in the sink, or its text. */
function rowText(row: PendingRow, sink: ByteSink): string {
  return row.rawAt === undefined ? row.text! : sink.buf.toString('utf8', row.rawAt, row.rawEnd);
}

/** Sends the rows' tuples (in row order) as one binary COPY; adjacent tuples go as one piece. */
async function copyTuples(
  client: pg.PoolClient,
  text: string,
  sink: ByteSink,
  rows: PendingRow[],
): Promise<void> {
  const stream = client.query(copyFrom(text));
  const done = new Promise<void>((resolve, reject) => {
    stream.on('finish', resolve);
    stream.on('error', reject);
  });
  stream.write(COPY_HEADER);
  let from = rows[0]!.at!;
  let to = rows[0]!.end!;
  for (let i = 1; i < rows.length; i++) {
    const r = rows[i]!;
    if (r.at === to) {
      to = r.end!;
      continue;
    }
    stream.write(sink.view(from, to));
    from = r.at!;
    to = r.end!;
  }
  stream.write(sink.view(from, to));
  stream.end(COPY_TRAILER);
  await done;
}
