import type pg from 'pg';
import type { CitationsTable } from './types.ts';

/**
 * The enrichment's page writes (src/enrich/page-rows.ts builds the rows from a thread's parsed
 * history): messages, artifacts, their citations and quarantined entries, and each thread's
 * checkpoint and end, as rows of JSON documents. Columns as in docs/data-dictionary.md; each
 * row carries the load id it was written by.
 */

/** A thread's part of a statement: its new checkpoint and, with `finish`, its end. */
export interface PageHeadRow {
  thread_id: string;
  next_index: number;
  finish: boolean;
  status: 'done' | 'deleted' | 'forbidden' | null;
  requested_at: string | null;
  has_name: boolean;
  name: string | null;
  error: string | null;
  /** The positions the page holds (from_index up to next_index, or on with to_end); null: none looked at. */
  from_index: number | null;
  to_end: boolean;
  rewrite: boolean;
}

export interface PageMessageRow {
  message_id: string;
  thread_id: string;
  position: number;
  role: string | null;
  text: string | null;
  created_at: string | null;
  is_cancelled: boolean;
  raw: Record<string, unknown>;
  load_id: string;
}

export interface PageArtifactRow {
  artifact_id: string;
  thread_id: string;
  message_id: string;
  output_type: string | null;
  title: string | null;
  val: string | null;
  val_json: unknown;
  resolved_text_objects: boolean | null;
  raw: Record<string, unknown>;
  fetched_via: 'v2' | 'legacy';
  load_id: string;
}

/** A message or artifact whose citations the page replaces: `n` of them now. */
export interface PageOwnerRow {
  kind: 'message' | 'artifact';
  id: string;
  n: number;
}

/** A `citations` row, its time as text and its extra fields as a JSON object. */
export type PageCitationRow = Omit<
  CitationsTable,
  '_load_id' | '_loaded_at' | 'last_updated_at' | 'extra'
> & {
  last_updated_at: string | null;
  /** Type-specific and data-point fields (url, snippet_start, data_point, …), verbatim; null when none. */
  extra: Record<string, unknown> | null;
  load_id: string;
};

/** A history entry or artifact quarantined (`rejected_records`). */
export interface PageRejectRow {
  source: 'history' | 'artifact';
  source_name: string;
  thread_id: string;
  line_no: number;
  raw: string;
  raw_length: number;
  error_code: string;
  error_detail: string;
  load_id: string;
}

export interface PageRows {
  heads: PageHeadRow[];
  messages: PageMessageRow[];
  artifacts: PageArtifactRow[];
  owners: PageOwnerRow[];
  citations: PageCitationRow[];
  rejects: PageRejectRow[];
}

/**
 * Every page of a call in one statement. The rows travel as JSON documents that Postgres unpacks
 * (json_to_recordset): the client neither builds nor binds a parameter per value, and the
 * statement text never changes, so it is prepared once per connection. A re-read owner's
 * citations are replaced by upserting the ordinals below its new count and deleting those at or
 * above it: the two touch disjoint rows, as the parts of one statement must.
 */
const WRITE_PAGES_SQL = `
with pages as (
  select * from json_to_recordset($1::json) as p(thread_id uuid, next_index integer, finish boolean,
    status text, requested_at timestamptz, has_name boolean, name text, error text,
    from_index integer, to_end boolean, rewrite boolean)
  -- Only threads still in \`threads\`, each row locked until this statement commits: \`crs-sync
  -- forget\` deletes a thread's row first (src/warehouse/privacy/forget.ts), so it waits for a page
  -- in flight and then erases what it wrote, and a page after it finds no row and writes nothing.
  where exists (select 1 from threads t where t.thread_id = p.thread_id for share)
), page_messages as (
  select * from json_to_recordset($2::json) as x(message_id uuid, thread_id uuid, position integer,
    role text, text text, created_at timestamptz, is_cancelled boolean, raw jsonb, load_id text)
  where x.thread_id = any(array(select thread_id from pages))
), new_messages as (
  insert into thread_messages
    (message_id, thread_id, position, role, text, created_at, is_cancelled, raw, _load_id)
  select x.message_id, x.thread_id, x.position, x.role, x.text, x.created_at, x.is_cancelled, x.raw,
         x.load_id
  from page_messages x
  on conflict (message_id) do update set
    thread_id = excluded.thread_id, position = excluded.position, role = excluded.role,
    text = excluded.text, created_at = excluded.created_at, is_cancelled = excluded.is_cancelled,
    raw = excluded.raw, _load_id = excluded._load_id, _loaded_at = now()
), new_artifacts as (
  insert into artifacts
    (artifact_id, thread_id, message_id, output_type, title, val, val_json, resolved_text_objects, raw,
     fetched_via, _load_id)
  select x.artifact_id, x.thread_id, x.message_id, x.output_type, x.title, x.val, x.val_json,
         x.resolved_text_objects, x.raw, x.fetched_via, x.load_id
  from json_to_recordset($3::json) as x(artifact_id text, thread_id uuid, message_id uuid,
    output_type text, title text, val text, val_json jsonb, resolved_text_objects boolean, raw jsonb,
    fetched_via text, load_id text)
  where x.thread_id = any(array(select thread_id from pages))
  on conflict (artifact_id) do update set
    thread_id = excluded.thread_id, message_id = excluded.message_id, output_type = excluded.output_type,
    title = excluded.title, val = excluded.val, val_json = excluded.val_json,
    resolved_text_objects = excluded.resolved_text_objects, raw = excluded.raw,
    fetched_via = excluded.fetched_via, _load_id = excluded._load_id, _loaded_at = now()
), owners as (
  select * from json_to_recordset($4::json) as o(kind text, id text, n integer)
), stale_messages as (
  -- What the service no longer has at the positions a page holds (its history shrank or was
  -- rewritten): none in the common case, an index range of the thread's own positions to find out.
  delete from thread_messages m using pages p
  where m.thread_id = p.thread_id and p.from_index is not null and m.position >= p.from_index
    and (p.to_end or m.position < p.next_index)
    and m.thread_id = any(array(select thread_id from pages where from_index is not null))
    and not exists (select 1 from page_messages x where x.message_id = m.message_id)
  returning m.message_id
), stale_artifacts as (
  -- Those of a message gone, and those a message of the page no longer names (or names but the
  -- service no longer serves: quarantined this time). One the page stores is never among them.
  delete from artifacts a
  where a.thread_id = any(array(select thread_id from pages where from_index is not null))
    and (a.message_id = any(array(select message_id from stale_messages))
      or a.message_id = any(array(select message_id from page_messages)))
    and not (a.artifact_id = any(array(select id from owners where kind = 'artifact')))
  returning a.artifact_id
), stale_message_citations as (
  delete from citations c
  where c.owner_kind = 'message' and c.owner_id = any(array(select message_id::text from stale_messages))
), stale_artifact_citations as (
  delete from citations c
  where c.owner_kind = 'artifact' and c.owner_id = any(array(select artifact_id from stale_artifacts))
), old_citations as (
  delete from citations c using owners o
  where c.owner_kind = o.kind and c.owner_id = o.id and c.ordinal >= o.n
    -- Postgres guesses 100 rows for any json_to_recordset, which makes a scan of a table of some
    -- thousand rows look cheaper than probing its index that often; an array of the keys is
    -- guessed at 10, so the index is used as soon as it pays.
    and c.owner_kind in ('message', 'artifact') and c.owner_id = any(array(select id from owners))
), new_citations as (
  insert into citations
    (owner_kind, owner_id, ordinal, message_id, artifact_id, thread_id, citation_id, internal_id,
     citation_type, name, inline_offset, summary, last_updated_at, is_snippet, extra, _load_id)
  select x.owner_kind, x.owner_id, x.ordinal, x.message_id, x.artifact_id, x.thread_id, x.citation_id,
         x.internal_id, x.citation_type, x.name, x.inline_offset, x.summary, x.last_updated_at,
         x.is_snippet, x.extra, x.load_id
  from json_to_recordset($5::json) as x(owner_kind text, owner_id text, ordinal integer, message_id uuid,
    artifact_id text, thread_id uuid, citation_id text, internal_id text, citation_type text, name text,
    inline_offset integer, summary text, last_updated_at timestamptz, is_snippet boolean, extra jsonb,
    load_id text)
  where x.thread_id = any(array(select thread_id from pages))
  on conflict (owner_kind, owner_id, ordinal) do update set
    message_id = excluded.message_id, artifact_id = excluded.artifact_id, thread_id = excluded.thread_id,
    citation_id = excluded.citation_id, internal_id = excluded.internal_id,
    citation_type = excluded.citation_type, name = excluded.name, inline_offset = excluded.inline_offset,
    summary = excluded.summary, last_updated_at = excluded.last_updated_at,
    is_snippet = excluded.is_snippet, extra = excluded.extra, _load_id = excluded._load_id,
    _loaded_at = now()
), new_rejects as (
  insert into rejected_records
    (_load_id, source, source_name, thread_id, line_no, raw, raw_length, error_code, error_detail)
  select x.load_id, x.source, x.source_name, x.thread_id, x.line_no, x.raw, x.raw_length, x.error_code,
         x.error_detail
  from json_to_recordset($6::json) as x(source text, source_name text, thread_id uuid, line_no bigint,
    raw text, raw_length bigint, error_code text, error_detail text, load_id text)
  where x.thread_id = any(array(select thread_id from pages))
  -- A retried page must not quarantine the same entry twice (unique per load, source, name, line).
  on conflict do nothing
)
update threads t set
  -- Never backwards, but for a re-read history: an overlapping older attempt at the same thread
  -- may commit a page late.
  history_count = case when p.rewrite then p.next_index else greatest(t.history_count, p.next_index) end,
  enrich_status = case
    when not p.finish then t.enrich_status
    when p.status = 'done' and t.enrich_requested_at is distinct from p.requested_at then t.enrich_status
    else p.status end,
  enriched_at = case when p.finish then now() else t.enriched_at end,
  enrich_attempts = case when p.finish then 0 else t.enrich_attempts end,
  last_error = case when p.finish then p.error else t.last_error end,
  thread_name = case when p.finish and p.has_name then p.name else t.thread_name end
from pages p
where t.thread_id = p.thread_id and t.thread_id = any(array(select thread_id from pages))`;

/**
 * Writes the rows of one or more pages in the one statement above. The pages must be of
 * different threads and name no message or artifact twice (one statement cannot upsert a row
 * twice).
 */
export async function writePageRows(pool: Pick<pg.Pool, 'query'>, rows: PageRows): Promise<void> {
  if (rows.heads.length === 0) return;
  await pool.query({
    name: 'crs_enrich_pages',
    text: WRITE_PAGES_SQL,
    values: [
      JSON.stringify(rows.heads),
      JSON.stringify(rows.messages),
      JSON.stringify(rows.artifacts),
      JSON.stringify(rows.owners),
      JSON.stringify(rows.citations),
      JSON.stringify(rows.rejects),
    ],
  });
}
