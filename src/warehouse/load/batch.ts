import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { LoaderClient } from '../ledger.ts';

/**
 * The statements of one loader batch (src/ingest/merge/merge.ts decides what each row does and
 * calls these in its transaction, beginning with transaction.ts's `beginLoad`): the lookup of the
 * batch's keys, new rows by binary COPY straight into `analytics_messages`, changed rows by COPY
 * into a temporary stage and one INSERT … ON CONFLICT from it, the threads to enrich
 * (`thread_queue`), the quarantine's rows (`rejected_records`). The checkpoint and the per-day
 * counts are checkpoints.ts's, the ledger's mirror and the drift counts ledger.ts's and
 * schema-drift.ts's.
 *
 * The loader's hot path, so these talk to `pg` directly, as named (prepared) statements.
 */

/**
 * The columns of every `analytics_messages` tuple the loader writes, in the order the COPY
 * statements name them: src/ingest/merge/copy-binary.ts writes each tuple's fields in this order.
 */
export const MESSAGE_TUPLE_COLUMNS = [
  'message_id',
  'thread_id',
  'user_id',
  'message_time',
  'message_date',
  'input',
  'response',
  'extra',
  'record_hash',
  '_source_line',
  '_load_id',
  'line_hash',
  'response_chars',
] as const;

const COLUMN_LIST = MESSAGE_TUPLE_COLUMNS.join(',');
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

/** What the warehouse holds for a key: its record hash, whether deleted, its line's sha1, its day. */
export interface StoredKey {
  id: string;
  h: string;
  d: boolean;
  lh: string | null;
  md: string;
}

/** The stored rows of the batch's keys (`ids`), deleted ones included. */
export async function lookupStoredKeys(client: LoaderClient, ids: string[]): Promise<StoredKey[]> {
  const found = await client.query<StoredKey>({ name: 'crs_lookup', text: LOOKUP_SQL, values: [ids] });
  return found.rows;
}

/** Where a COPY's bytes go: the binary header, the tuples, then `end` with the trailer. */
export interface CopyInput {
  write(chunk: Uint8Array): unknown;
  end(chunk: Uint8Array): unknown;
}

/**
 * Runs the COPY statement `text` on `client`, `fill` writing its whole input (binary format, from
 * its header to its trailer); resolves once the server has taken it.
 */
export async function copyIn(
  client: Pick<pg.ClientBase, 'query'>,
  text: string,
  fill: (input: CopyInput) => void,
): Promise<void> {
  const stream = client.query(copyFrom(text));
  const done = new Promise<void>((resolve, reject) => {
    stream.on('finish', resolve);
    stream.on('error', reject);
  });
  fill(stream);
  await done;
}

/** New rows: their tuples (MESSAGE_TUPLE_COLUMNS) copied straight into `analytics_messages`. */
export async function copyNewRows(client: pg.ClientBase, fill: (input: CopyInput) => void): Promise<void> {
  await copyIn(client, COPY_TARGET_SQL, fill);
}

/**
 * Changed rows (or every row of a batch retried after a unique violation): copied into the
 * session's stage (created on the connection's first use) and merged from it into
 * `analytics_messages`, undeleting a deleted row.
 */
export async function mergeStagedRows(
  client: pg.ClientBase,
  fill: (input: CopyInput) => void,
): Promise<void> {
  if (!staged.has(client)) {
    await client.query(STAGE_TABLE_SQL);
    staged.add(client);
  }
  await copyIn(client, COPY_STAGE_SQL, fill);
  await client.query({ name: 'crs_merge_stage', text: MERGE_STAGE_SQL });
}

// Appended, not upserted: partitions touch the same threads, and an upsert would hold their row
// locks until commit (the finalize moves the queue into `threads` once per load: threads.ts).
const THREADS_SQL = `
  insert into thread_queue (thread_id, user_id, load_id)
  select t.thread_id, t.user_id, $3 from unnest($1::uuid[], $2::uuid[]) as t(thread_id, user_id)`;

/** Threads whose messages the batch changed, queued for enrichment under the run `runId`. */
export async function queueThreads(
  client: LoaderClient,
  threadIds: string[],
  userIds: string[],
  runId: string,
): Promise<void> {
  await client.query({ name: 'crs_threads', text: THREADS_SQL, values: [threadIds, userIds, runId] });
}

// One open reject per line (its source, day and digest): a line that a later load reads again
// counts that load once (however many times it holds the line) and notes it as the last; the first
// load, line and time stay. The batch's lines go in the order of their key (the merge sorts them),
// so two partitions of a load holding the same lines lock their rows in one order. A batch merged
// again after a rollback writes as if for the first time, and a line an earlier attempt committed
// is never sent again (src/ingest/merge/router.ts): a resumed load counts once.
const REJECTS_SQL = `
  insert into rejected_records as r (_load_id, last_load_id, source, source_name, day, line_no, raw, raw_bytes,
    raw_length, error_code, error_detail, message_id, user_id, thread_id, line_digest)
  select $1, $1, $2, $3, x.day, x.line_no, x.raw, x.raw_bytes, x.raw_length, x.code, x.detail, x.message_id,
    x.user_id, x.thread_id, x.digest
  from unnest($4::date[], $5::bigint[], $6::text[], $7::bytea[], $8::bigint[], $9::text[], $10::text[], $11::uuid[],
    $12::uuid[], $13::uuid[], $14::bytea[])
    with ordinality as x(day, line_no, raw, raw_bytes, raw_length, code, detail, message_id, user_id, thread_id, digest, n)
  order by x.n
  on conflict (source, coalesce(day, 'infinity'::date), line_digest) where line_digest is not null and replayed_at is null
  do update set times_seen = r.times_seen + (r.last_load_id is distinct from excluded.last_load_id)::int,
    last_load_id = excluded.last_load_id, last_seen_at = now(), error_code = excluded.error_code,
    error_detail = excluded.error_detail,
    -- A reject quarantined before its ids were kept gets them when its line is read again.
    user_id = coalesce(r.user_id, excluded.user_id), thread_id = coalesce(r.thread_id, excluded.thread_id)`;

// A replay's rejects: rows of its load alone, removed once the replay has noted them
// (src/ingest/source/replay.ts).
const REJECTS_PER_LOAD_SQL = `
  insert into rejected_records (_load_id, source, source_name, day, line_no, raw, raw_bytes, raw_length, error_code,
    error_detail, message_id, user_id, thread_id)
  select $1, $2, $3, r.day, r.line_no, r.raw, r.raw_bytes, r.raw_length, r.code, r.detail, r.message_id, r.user_id,
    r.thread_id
  from unnest($4::date[], $5::bigint[], $6::text[], $7::bytea[], $8::bigint[], $9::text[], $10::text[], $11::uuid[],
    $12::uuid[], $13::uuid[])
    as r(day, line_no, raw, raw_bytes, raw_length, code, detail, message_id, user_id, thread_id)
  on conflict (_load_id, source, coalesce(source_name, ''), line_no) where line_no is not null do nothing`;

/** A quarantined line as the batch writes it (src/ingest/merge/pending.ts builds them). */
export interface BatchReject {
  day: string | null;
  lineNo: number;
  raw: string;
  rawBytes: Buffer | null;
  rawLength: number;
  code: string;
  detail: string;
  messageId: string | null;
  /**
   * The line's `User ID` (as the warehouse stores user ids) and `Thread ID`, where they can be
   * read from the whole line: `crs-sync forget` finds the reject by them.
   */
  userId: string | null;
  threadId: string | null;
  /** The line's identity in the quarantine (its source, day and this digest). */
  digest: Buffer;
}

/** Which load quarantines the lines, and from where (`rejected_records.source`, `source_name`). */
export interface RejectOrigin {
  runId: string;
  source: string;
  sourceName: string;
}

/** The batch's columns of its rejects, in the statements' parameter order after the origin's. */
function rejectValues(o: RejectOrigin, rejects: readonly BatchReject[]): unknown[] {
  return [
    o.runId,
    o.source,
    o.sourceName,
    rejects.map((r) => r.day),
    rejects.map((r) => r.lineNo),
    rejects.map((r) => r.raw),
    rejects.map((r) => r.rawBytes),
    rejects.map((r) => r.rawLength),
    rejects.map((r) => r.code),
    rejects.map((r) => r.detail),
    rejects.map((r) => r.messageId),
    rejects.map((r) => r.userId),
    rejects.map((r) => r.threadId),
  ];
}

/**
 * The batch's lines as the one open reject of each (an upsert by source, day and digest), in the
 * order given: one per line and day, sorted by their key (the caller dedups and sorts).
 */
export async function quarantineLines(
  client: LoaderClient,
  o: RejectOrigin,
  rejects: readonly BatchReject[],
): Promise<void> {
  const values = rejectValues(o, rejects);
  values.push(rejects.map((r) => r.digest));
  await client.query({ name: 'crs_rejects', text: REJECTS_SQL, values });
}

/** The batch's lines as rows of this load alone (unique per load and line number): a replay's. */
export async function quarantineLinesOfLoad(
  client: LoaderClient,
  o: RejectOrigin,
  rejects: readonly BatchReject[],
): Promise<void> {
  await client.query({
    name: 'crs_rejects_per_load',
    text: REJECTS_PER_LOAD_SQL,
    values: rejectValues(o, rejects),
  });
}
