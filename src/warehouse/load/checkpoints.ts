import type pg from 'pg';
import type { LoaderClient } from '../ledger.ts';

/**
 * A load's checkpoints (`load_checkpoints`, one row per key partition: the line up to which the
 * partition is committed, and the counts of its committed batches) and its per-day counts
 * (`load_day_counts`). A batch advances both in its own transaction, with its rows (batch.ts,
 * src/ingest/merge/merge.ts), so they are sums over committed data: a resumed load starts from
 * them, and the finalize reads the load's counts from them.
 */

/** One partition's checkpoint row. */
export interface CheckpointRow {
  part: number;
  /** The partition count the load was started with (an existing load keeps its own). */
  parts: number;
  lines_committed: number;
}

/** The load key's checkpoint rows, created on its first run (`parts` of them), in partition order. */
export async function openCheckpointRows(
  pool: pg.Pool,
  loadKey: string,
  parts: number,
): Promise<CheckpointRow[]> {
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
  return cp.rows;
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
