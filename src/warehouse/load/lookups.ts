import type { LoaderClient } from '../ledger.ts';

/**
 * What a load reads of `analytics_messages` outside its batches: the stored rows of lines an
 * earlier attempt committed (a resumed load checks them, src/ingest/merge/resume.ts), and the
 * open day's lines by content (an intraday pull skips them, src/ingest/merge/known-lines.ts).
 */

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
