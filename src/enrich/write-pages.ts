import type pg from 'pg';
import type { ParsedArtifact } from './artifact.ts';
import type { CitationFields } from './citation.ts';
import type { ParsedEntry } from './history-entry.ts';
import { storableText } from './storable.ts';

export interface RejectRow {
  source: 'history' | 'artifact';
  /** Identifies the thread (and artifact), so line_no (the history position) is unique within it. */
  sourceName: string;
  lineNo: number;
  raw: string;
  code: string;
  detail: string;
}

export interface StoredArtifact {
  artifactId: string;
  messageId: string;
  fetchedVia: 'v2' | 'legacy';
  parsed: ParsedArtifact;
}

/** The end of a thread's enrichment. */
export interface FinishThread {
  status: 'done' | 'deleted' | 'forbidden';
  /**
   * enrich_requested_at as read when the thread was picked up: 'done' is written only if it is
   * unchanged (nobody queued the thread again meanwhile); otherwise the thread stays 'pending'.
   */
  requestedAt: string | null;
  name: string | undefined;
  error?: string;
}

export interface PageWrite {
  threadId: string;
  loadId: string;
  messages: Array<{ position: number; entry: ParsedEntry }>;
  artifacts: StoredArtifact[];
  rejects: RejectRow[];
  /** The thread's history position after this page: the checkpoint. */
  nextIndex: number;
  /**
   * The positions this page holds, from `fromIndex` up to `nextIndex` (with `toEnd`: every
   * position from `fromIndex` on, the page being the history's last). A stored message of the
   * thread at one of them that the page does not hold is gone upstream: it is deleted, with its
   * citations and artifacts. Absent on a write that holds no history (a thread's end alone).
   */
  covers?: { fromIndex: number; toEnd: boolean };
  /**
   * A page of a history re-read from position 0 because it changed upstream: the checkpoint is set
   * to `nextIndex` even when that is below the stored one.
   */
  rewrite?: boolean;
  /** Set on the history's last page: the thread ends in the same statement. */
  finish?: FinishThread;
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
), page_messages as (
  select * from json_to_recordset($2::json) as x(message_id uuid, thread_id uuid, position integer,
    role text, text text, created_at timestamptz, is_cancelled boolean, raw jsonb, load_id text)
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

function citationRows(
  owner: { kind: 'message' | 'artifact'; id: string; messageId: string | null; artifactId: string | null },
  p: PageWrite,
  cs: CitationFields[],
  out: object[],
): void {
  cs.forEach((c, ordinal) => {
    out.push({
      owner_kind: owner.kind,
      owner_id: owner.id,
      ordinal,
      message_id: owner.messageId,
      artifact_id: owner.artifactId,
      thread_id: p.threadId,
      citation_id: c.citation_id,
      internal_id: c.internal_id,
      citation_type: c.citation_type,
      name: c.name,
      inline_offset: c.inline_offset,
      summary: c.summary,
      last_updated_at: c.last_updated_at,
      is_snippet: c.is_snippet,
      extra: c.extra,
      load_id: p.loadId,
    });
  });
}

/**
 * Stores history pages and advances each thread's checkpoint (and, with `finish`, ends the
 * thread), all atomically: a retried activity resumes after the last committed page and rewrites
 * nothing twice (rows are upserts, citations of a re-read owner are replaced, rejects are unique
 * per thread position). The pages must be of different threads and name no message or artifact
 * twice (one statement cannot upsert a row twice): see `pageKeys`.
 *
 * Long: the statements of one transaction, in the order they must run; each is a single query.
 */
export async function writePages(pool: Pick<pg.Pool, 'query'>, pages: readonly PageWrite[]): Promise<void> {
  if (pages.length === 0) return;
  const heads: object[] = [];
  const messages: object[] = [];
  const artifacts: object[] = [];
  const owners: object[] = [];
  const citations: object[] = [];
  const rejects: object[] = [];
  for (const p of pages) {
    const f = p.finish;
    heads.push({
      thread_id: p.threadId,
      next_index: p.nextIndex,
      finish: f !== undefined,
      status: f?.status ?? null,
      requested_at: f?.requestedAt ?? null,
      has_name: f?.name !== undefined,
      name: f?.name === undefined ? null : storableText(f.name),
      error: f?.error === undefined ? null : storableText(f.error),
      from_index: p.covers?.fromIndex ?? null,
      to_end: p.covers?.toEnd ?? false,
      rewrite: p.rewrite === true,
    });
    for (const { position, entry: e } of p.messages) {
      messages.push({
        message_id: e.message_id,
        thread_id: p.threadId,
        position,
        role: e.role,
        text: e.text,
        created_at: e.created_at,
        is_cancelled: e.is_cancelled,
        raw: e.raw,
        load_id: p.loadId,
      });
      owners.push({ kind: 'message', id: e.message_id, n: e.citations.length });
      citationRows(
        { kind: 'message', id: e.message_id, messageId: e.message_id, artifactId: null },
        p,
        e.citations,
        citations,
      );
    }
    for (const a of p.artifacts) {
      artifacts.push({
        artifact_id: a.artifactId,
        thread_id: p.threadId,
        message_id: a.messageId,
        output_type: a.parsed.output_type,
        title: a.parsed.title,
        val: a.parsed.val,
        val_json: a.parsed.val_json,
        resolved_text_objects: a.parsed.resolved_text_objects,
        raw: a.parsed.raw,
        fetched_via: a.fetchedVia,
        load_id: p.loadId,
      });
      owners.push({ kind: 'artifact', id: a.artifactId, n: a.parsed.citations.length });
      citationRows(
        { kind: 'artifact', id: a.artifactId, messageId: a.messageId, artifactId: a.artifactId },
        p,
        a.parsed.citations,
        citations,
      );
    }
    for (const r of p.rejects) {
      rejects.push({
        source: r.source,
        source_name: r.sourceName,
        thread_id: p.threadId,
        line_no: r.lineNo,
        raw: r.raw,
        raw_length: Buffer.byteLength(r.raw),
        error_code: r.code,
        error_detail: storableText(r.detail),
        load_id: p.loadId,
      });
    }
  }
  await pool.query({
    name: 'crs_enrich_pages',
    text: WRITE_PAGES_SQL,
    values: [
      JSON.stringify(heads),
      JSON.stringify(messages),
      JSON.stringify(artifacts),
      JSON.stringify(owners),
      JSON.stringify(citations),
      JSON.stringify(rejects),
    ],
  });
}

/** The keys a page upserts: two pages sharing one cannot go in the same statement. */
export function pageKeys(p: PageWrite): string[] {
  return [
    `t:${p.threadId}`,
    ...p.messages.map((m) => `m:${m.entry.message_id}`),
    ...p.artifacts.map((a) => `a:${a.artifactId}`),
  ];
}

/** The end of one thread's enrichment when no page goes with it (a thread deleted or forbidden). */
export function finishOnly(threadId: string, loadId: string, finish: FinishThread): PageWrite {
  return { threadId, loadId, messages: [], artifacts: [], rejects: [], nextIndex: 0, finish };
}
