import type pg from 'pg';
import type { LoaderClient } from '../ledger.ts';

/**
 * What a load keeps in the warehouse to go on after a stop, and what it reads back of it outside
 * its batches:
 *
 * - its checkpoints (`load_checkpoints`, one row per key partition: the line up to which the
 *   partition is committed, and the counts of its committed batches) and its per-day counts
 *   (`load_day_counts`). A batch advances both in its own transaction, with its rows (batch.ts,
 *   src/ingest/merge/merge.ts), so they are sums over committed data: a resumed load starts from
 *   them, and the finalize reads the load's counts from them;
 * - the stored rows of lines an earlier attempt committed (a resumed load checks them,
 *   src/ingest/merge/resume.ts), and the open day's lines by content (an intraday pull skips
 *   them, src/ingest/merge/known-lines.ts).
 */

/** One partition's checkpoint row. */
interface CheckpointRow {
  part: number;
  /** The partition count the load was started with (an existing load keeps its own). */
  parts: number;
  lines_committed: number;
}

/** Where a load starts: its checkpoints as the warehouse holds them. */
export interface Checkpoints {
  /** The load's partition count (an existing load keeps its own). */
  parts: number;
  /** Per partition, the line up to which it is committed. */
  committed: number[];
  resumed: boolean;
  resumedFromLine: number;
}

/** The load key's checkpoints, its rows created on its first run (`parts` of them). */
export async function openCheckpoints(pool: pg.Pool, loadKey: string, parts: number): Promise<Checkpoints> {
  await pool.query(
    `insert into load_checkpoints (load_key, part, parts)
     select $1, g, $2 from generate_series(0, $2 - 1) g
     on conflict (load_key, part) do nothing`,
    [loadKey, parts],
  );
  const cp = await pool.query<CheckpointRow>(
    'select part, parts, lines_committed from load_checkpoints where load_key = $1 order by part',
    [loadKey],
  );
  const committed = cp.rows.map((r) => r.lines_committed);
  return {
    parts: cp.rows[0]?.parts ?? parts,
    committed,
    resumed: committed.some((c) => c > 0),
    resumedFromLine: Math.min(...committed),
  };
}

const CHECKPOINT_SQL = `
  update load_checkpoints set lines_committed = $3, rows_read = rows_read + $4, rows_inserted = rows_inserted + $5,
    rows_updated = rows_updated + $6, rows_unchanged = rows_unchanged + $7, rows_rejected = rows_rejected + $8,
    rows_suppressed = rows_suppressed + $9, updated_at = now()
  where load_key = $1 and part = $2`;

/** A batch's counts: read, inserted, updated, unchanged, rejected, suppressed. */
export interface CheckpointCounts {
  rowsRead: number;
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
  suppressed: number;
}

/** The partition's checkpoint moved to `uptoLine`, its counts added to, in the batch's transaction. */
export async function advanceCheckpoint(
  client: LoaderClient,
  loadKey: string,
  part: number,
  uptoLine: number,
  c: CheckpointCounts,
): Promise<void> {
  await client.query({
    name: 'crs_checkpoint',
    text: CHECKPOINT_SQL,
    values: [
      loadKey,
      part,
      uptoLine,
      c.rowsRead,
      c.inserted,
      c.updated,
      c.unchanged,
      c.rejected,
      c.suppressed,
    ],
  });
}

const DAY_COUNTS_SQL = `
  insert into load_day_counts (load_key, part, day, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected,
    rows_suppressed)
  select $1, $2, d.day, d.r, d.i, d.u, d.n, d.j, d.s
  from unnest($3::date[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[])
    as d(day, r, i, u, n, j, s)
  on conflict (load_key, part, day) do update set rows_read = load_day_counts.rows_read + excluded.rows_read,
    rows_inserted = load_day_counts.rows_inserted + excluded.rows_inserted,
    rows_updated = load_day_counts.rows_updated + excluded.rows_updated,
    rows_unchanged = load_day_counts.rows_unchanged + excluded.rows_unchanged,
    rows_rejected = load_day_counts.rows_rejected + excluded.rows_rejected,
    rows_suppressed = load_day_counts.rows_suppressed + excluded.rows_suppressed`;

/** A day's counts in a batch: records read, inserted, updated, unchanged; lines quarantined; records suppressed. */
export type DayCounts = [number, number, number, number, number, number];

/** A batch's counts per UTC day added to the partition's, in the batch's transaction. */
export async function addDayCounts(
  client: LoaderClient,
  loadKey: string,
  part: number,
  days: [string, DayCounts][],
): Promise<void> {
  await client.query({
    name: 'crs_day_counts',
    text: DAY_COUNTS_SQL,
    values: [
      loadKey,
      part,
      days.map((d) => d[0]),
      days.map((d) => d[1][0]),
      days.map((d) => d[1][1]),
      days.map((d) => d[1][2]),
      days.map((d) => d[1][3]),
      days.map((d) => d[1][4]),
      days.map((d) => d[1][5]),
    ],
  });
}

/** Sums over committed batches, as the queries name them (read, inserted, updated, unchanged, rejected, suppressed). */
export interface Sums {
  r: number;
  i: number;
  u: number;
  n: number;
  j: number;
  s: number;
}

/** The load's counts summed over its committed checkpoints (an aggregate: one row, or undefined). */
export async function committedTotals(pool: pg.Pool, loadKey: string): Promise<Sums | undefined> {
  const tot = await pool.query<Sums>(
    `select coalesce(sum(rows_read),0)::bigint r, coalesce(sum(rows_inserted),0)::bigint i,
            coalesce(sum(rows_updated),0)::bigint u, coalesce(sum(rows_unchanged),0)::bigint n,
            coalesce(sum(rows_rejected),0)::bigint j, coalesce(sum(rows_suppressed),0)::bigint s
     from load_checkpoints where load_key = $1`,
    [loadKey],
  );
  return tot.rows[0];
}

/** The load's counts per UTC day, in day order (`r` counts records; the lines quarantined are `j`). */
export async function committedDays(pool: pg.Pool, loadKey: string): Promise<(Sums & { day: string })[]> {
  const perDay = await pool.query<Sums & { day: string }>(
    `select day::text, sum(rows_read)::bigint r, sum(rows_inserted)::bigint i, sum(rows_updated)::bigint u,
            sum(rows_unchanged)::bigint n, sum(rows_rejected)::bigint j, sum(rows_suppressed)::bigint s
     from load_day_counts where load_key = $1 group by day order by day`,
    [loadKey],
  );
  return perDay.rows;
}

// ---- read back outside the batches ---------------------------------------------------------

const VERIFY_SQL = `select message_id::text as id, record_hash as h, _deleted_at is not null as d, _load_id as l,
             _source_line as s from analytics_messages where message_id = any($1::uuid[])`;

/** A stored row as a resumed load checks it: record hash, deleted, the run and line that wrote it. */
export interface CommittedRow {
  id: string;
  h: string;
  d: boolean;
  l: string;
  s: number;
}

/** The stored rows of `ids` (the keys of skipped lines), deleted ones included. */
export async function lookupCommittedRows(client: LoaderClient, ids: string[]): Promise<CommittedRow[]> {
  const found = await client.query<CommittedRow>({ name: 'crs_verify', text: VERIFY_SQL, values: [ids] });
  return found.rows;
}

// One row: its line's sha1 (40 hex digits) and the last 8 hex digits of its message id (what
// `partOf` routes by), as one text for the whole day: no row object per row on the client. Hex
// text rather than bytea: the server's decode would fail the query on one malformed hash, which
// the client instead leaves out; a regular expression in the query cost ~3 µs a row.
const KNOWN_LINES_SQL = `
  select count(*)::int as n, string_agg(line_hash || right(message_id::text, 8), '') as t
  from (
    select line_hash, message_id from analytics_messages
    where message_date = $1::date and _deleted_at is null and length(line_hash) = 40
    limit $2
  ) k`;

/**
 * At most `limit` live rows of `day` that have a line hash, as `n` rows of 48 hex digits in one
 * text `t` (the line's sha1, then the id's last 8 hex digits); `t` is null when there are none.
 */
export async function readKnownLineText(
  client: LoaderClient,
  day: string,
  limit: number,
): Promise<{ n: number; t: string | null } | undefined> {
  const r = await client.query<{ n: number; t: string | null }>({
    name: 'crs_known_lines',
    text: KNOWN_LINES_SQL,
    values: [day, limit],
  });
  return r.rows[0];
}
