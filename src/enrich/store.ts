import { type Kysely, sql } from 'kysely';
import type { Database, EnrichStatus, NewCitation } from '../warehouse/types.ts';
import type { ParsedArtifact } from './artifact.ts';
import type { CitationFields } from './citation.ts';
import type { ParsedEntry } from './history-entry.ts';

/** Repository functions of the enrichment (DESIGN.md §5 tables threads, thread_messages, citations, artifacts). */

export interface ThreadState {
  thread_id: string;
  enrich_status: EnrichStatus;
  history_count: number;
  enrich_attempts: number;
  /**
   * When the thread was last queued, as Postgres text (full microsecond precision, which a JS
   * Date would lose); a different value at the end means it was queued again meanwhile.
   */
  requested_at: string | null;
}

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

export interface PageWrite {
  threadId: string;
  loadId: string;
  messages: Array<{ position: number; entry: ParsedEntry }>;
  artifacts: StoredArtifact[];
  rejects: RejectRow[];
  /** The thread's history position after this page: the checkpoint. */
  nextIndex: number;
}

export async function listPendingThreads(
  db: Kysely<Database>,
  input: { afterThreadId: string | null; limit: number },
): Promise<string[]> {
  let q = db
    .selectFrom('threads')
    .select('thread_id')
    .where('enrich_status', '=', 'pending')
    .orderBy('thread_id')
    .limit(input.limit);
  if (input.afterThreadId) q = q.where('thread_id', '>', input.afterThreadId);
  return (await q.execute()).map((r) => r.thread_id);
}

export async function readThreadStates(
  db: Kysely<Database>,
  ids: readonly string[],
): Promise<Map<string, ThreadState>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('threads')
    .select(['thread_id', 'enrich_status', 'history_count', 'enrich_attempts'])
    .select(sql<string | null>`enrich_requested_at::text`.as('requested_at'))
    .where('thread_id', 'in', ids as string[])
    .execute();
  return new Map(rows.map((r) => [r.thread_id, r]));
}

function citationRows(
  owner: { kind: 'message' | 'artifact'; id: string; messageId: string | null; artifactId: string | null },
  threadId: string,
  loadId: string,
  cs: CitationFields[],
): NewCitation[] {
  return cs.map((c, ordinal) => ({
    owner_kind: owner.kind,
    owner_id: owner.id,
    ordinal,
    message_id: owner.messageId,
    artifact_id: owner.artifactId,
    thread_id: threadId,
    citation_id: c.citation_id,
    internal_id: c.internal_id,
    citation_type: c.citation_type,
    name: c.name,
    inline_offset: c.inline_offset,
    summary: c.summary,
    last_updated_at: c.last_updated_at,
    is_snippet: c.is_snippet,
    extra: c.extra === null ? null : JSON.stringify(c.extra),
    _load_id: loadId,
  }));
}

// Postgres caps a statement at 65535 parameters; citation rows have 16 columns.
const ROWS_PER_INSERT = 2000;

/**
 * Stores one history page and advances the thread's checkpoint, in one transaction: a retried
 * activity resumes after the last committed page and rewrites nothing twice (rows are upserts,
 * citations of a re-read owner are replaced, rejects are unique per thread position).
 */
export async function writePage(db: Kysely<Database>, p: PageWrite): Promise<void> {
  await db.transaction().execute(async (trx) => {
    if (p.messages.length > 0) {
      await trx
        .insertInto('thread_messages')
        .values(
          p.messages.map(({ position, entry: e }) => ({
            message_id: e.message_id,
            thread_id: p.threadId,
            position,
            role: e.role,
            text: e.text,
            created_at: e.created_at,
            is_cancelled: e.is_cancelled,
            raw: JSON.stringify(e.raw),
            _load_id: p.loadId,
          })),
        )
        .onConflict((oc) =>
          oc.column('message_id').doUpdateSet((eb) => ({
            thread_id: eb.ref('excluded.thread_id'),
            position: eb.ref('excluded.position'),
            role: eb.ref('excluded.role'),
            text: eb.ref('excluded.text'),
            created_at: eb.ref('excluded.created_at'),
            is_cancelled: eb.ref('excluded.is_cancelled'),
            raw: eb.ref('excluded.raw'),
            _load_id: eb.ref('excluded._load_id'),
            _loaded_at: sql<Date>`now()`,
          })),
        )
        .execute();
      await trx
        .deleteFrom('citations')
        .where('owner_kind', '=', 'message')
        .where(
          'owner_id',
          'in',
          p.messages.map((m) => m.entry.message_id),
        )
        .execute();
    }
    if (p.artifacts.length > 0) {
      await trx
        .insertInto('artifacts')
        .values(
          p.artifacts.map((a) => ({
            artifact_id: a.artifactId,
            thread_id: p.threadId,
            message_id: a.messageId,
            output_type: a.parsed.output_type,
            title: a.parsed.title,
            val: a.parsed.val,
            val_json: a.parsed.val_json === null ? null : JSON.stringify(a.parsed.val_json),
            resolved_text_objects: a.parsed.resolved_text_objects,
            raw: JSON.stringify(a.parsed.raw),
            fetched_via: a.fetchedVia,
            _load_id: p.loadId,
          })),
        )
        .onConflict((oc) =>
          oc.column('artifact_id').doUpdateSet((eb) => ({
            thread_id: eb.ref('excluded.thread_id'),
            message_id: eb.ref('excluded.message_id'),
            output_type: eb.ref('excluded.output_type'),
            title: eb.ref('excluded.title'),
            val: eb.ref('excluded.val'),
            val_json: eb.ref('excluded.val_json'),
            resolved_text_objects: eb.ref('excluded.resolved_text_objects'),
            raw: eb.ref('excluded.raw'),
            fetched_via: eb.ref('excluded.fetched_via'),
            _load_id: eb.ref('excluded._load_id'),
            _loaded_at: sql<Date>`now()`,
          })),
        )
        .execute();
      await trx
        .deleteFrom('citations')
        .where('owner_kind', '=', 'artifact')
        .where(
          'owner_id',
          'in',
          p.artifacts.map((a) => a.artifactId),
        )
        .execute();
    }
    const citations = [
      ...p.messages.flatMap(({ entry: e }) =>
        citationRows(
          { kind: 'message', id: e.message_id, messageId: e.message_id, artifactId: null },
          p.threadId,
          p.loadId,
          e.citations,
        ),
      ),
      ...p.artifacts.flatMap((a) =>
        citationRows(
          { kind: 'artifact', id: a.artifactId, messageId: a.messageId, artifactId: a.artifactId },
          p.threadId,
          p.loadId,
          a.parsed.citations,
        ),
      ),
    ];
    for (let i = 0; i < citations.length; i += ROWS_PER_INSERT) {
      await trx
        .insertInto('citations')
        .values(citations.slice(i, i + ROWS_PER_INSERT))
        .execute();
    }
    if (p.rejects.length > 0) {
      await trx
        .insertInto('rejected_records')
        .values(
          p.rejects.map((r) => ({
            _load_id: p.loadId,
            source: r.source,
            source_name: r.sourceName,
            thread_id: p.threadId,
            line_no: r.lineNo,
            raw: r.raw,
            raw_length: Buffer.byteLength(r.raw),
            error_code: r.code,
            error_detail: r.detail,
          })),
        )
        // A retried page must not quarantine the same entry twice (unique per load, source, name, line).
        .onConflict((oc) => oc.doNothing())
        .execute();
    }
    await trx
      .updateTable('threads')
      // Never backwards: an overlapping older attempt at the same thread may commit a page late.
      .set({ history_count: sql<number>`greatest(history_count, ${p.nextIndex})` })
      .where('thread_id', '=', p.threadId)
      .execute();
  });
}

/**
 * The end of one thread's enrichment. 'done' is written only if nobody queued the thread again
 * while it was being read (enrich_requested_at unchanged); otherwise it stays 'pending'.
 */
export async function finishThread(
  db: Kysely<Database>,
  threadId: string,
  f: {
    status: 'done' | 'deleted' | 'forbidden';
    requestedAt: string | null;
    name: string | undefined;
    error?: string;
  },
): Promise<void> {
  const stillQueued =
    f.requestedAt === null
      ? sql<boolean>`enrich_requested_at is not null`
      : sql<boolean>`enrich_requested_at is distinct from ${f.requestedAt}::timestamptz`;
  const status =
    f.status === 'done'
      ? sql<EnrichStatus>`case when ${stillQueued} then enrich_status else 'done' end`
      : sql<EnrichStatus>`${f.status}`;
  await db
    .updateTable('threads')
    .set({
      enrich_status: status,
      enriched_at: sql<Date>`now()`,
      enrich_attempts: 0,
      last_error: f.error ?? null,
      ...(f.name !== undefined ? { thread_name: f.name } : {}),
    })
    .where('thread_id', '=', threadId)
    .execute();
}

/**
 * A failed attempt at a thread: the error kept and, when `counts`, counted; after `maxAttempts`
 * counted failures the thread is 'failed' (no longer picked up until a load queues it again),
 * before that it stays 'pending'.
 */
export async function failThread(
  db: Kysely<Database>,
  threadId: string,
  f: { error: string; maxAttempts: number; permanent: boolean; counts: boolean },
): Promise<EnrichStatus> {
  const step = f.counts ? 1 : 0;
  const row = await db
    .updateTable('threads')
    .set((eb) => ({
      enrich_attempts: eb('enrich_attempts', '+', step),
      last_error: f.error,
      enrich_status: f.permanent
        ? sql<EnrichStatus>`'failed'`
        : sql<EnrichStatus>`case when enrich_attempts + ${step} >= ${f.maxAttempts} then 'failed' else enrich_status end`,
    }))
    .where('thread_id', '=', threadId)
    .returning('enrich_status')
    .executeTakeFirst();
  return row?.enrich_status ?? 'failed';
}

/**
 * Names from the thread list, and re-queueing of threads whose history grew since they were
 * enriched (the list's message_count is above the stored history_count).
 */
export async function applyThreadList(
  db: Kysely<Database>,
  entries: ReadonlyArray<{ thread_id: string; name: string | null; count: number | null }>,
): Promise<{ updated: number; requeued: number }> {
  if (entries.length === 0) return { updated: 0, requeued: 0 };
  const ids = entries.map((e) => e.thread_id);
  const names = entries.map((e) => e.name);
  const counts = entries.map((e) => e.count);
  const r = await sql<{ updated: number; requeued: number }>`
    with l as (
      select * from unnest(${ids}::uuid[], ${names}::text[], ${counts}::int[]) as l(thread_id, name, n)
    ), c as (
      select t.thread_id, coalesce(l.name, t.thread_name) as name,
             (t.enrich_status = 'done' and l.n > t.history_count) as requeue
      from threads t join l on l.thread_id = t.thread_id
      where t.thread_name is distinct from coalesce(l.name, t.thread_name)
         or (t.enrich_status = 'done' and l.n > t.history_count)
    ), u as (
      update threads t set
        thread_name = c.name,
        enrich_status = case when c.requeue then 'pending' else t.enrich_status end,
        enrich_requested_at = case when c.requeue then now() else t.enrich_requested_at end
      from c
      where t.thread_id = c.thread_id
      returning c.requeue::int as q
    )
    select count(*)::int as updated, coalesce(sum(q), 0)::int as requeued from u`.execute(db);
  return r.rows[0] ?? { updated: 0, requeued: 0 };
}
