import type pg from 'pg';
import {
  type PageArtifactRow,
  type PageCitationRow,
  type PageHeadRow,
  type PageMessageRow,
  type PageOwnerRow,
  type PageRejectRow,
  writePageRows,
} from '../warehouse/enrich-pages.ts';
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

function citationRows(
  owner: { kind: 'message' | 'artifact'; id: string; messageId: string | null; artifactId: string | null },
  p: PageWrite,
  cs: CitationFields[],
  out: PageCitationRow[],
): void {
  cs.forEach((c, ordinal) => {
    out.push({
      owner_kind: owner.kind,
      owner_id: owner.id,
      ordinal,
      message_id: owner.messageId,
      artifact_id: owner.artifactId,
      thread_id: p.threadId,
      ...c,
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
 * The statement itself is in src/warehouse/enrich-pages.ts; here, the pages become its rows.
 * Long: one pass over the pages fills the statement's row sets (heads, messages, artifacts,
 * owners, citations, rejects) side by side, so each entry is visited once.
 */
export async function writePages(pool: Pick<pg.Pool, 'query'>, pages: readonly PageWrite[]): Promise<void> {
  if (pages.length === 0) return;
  const heads: PageHeadRow[] = [];
  const messages: PageMessageRow[] = [];
  const artifacts: PageArtifactRow[] = [];
  const owners: PageOwnerRow[] = [];
  const citations: PageCitationRow[] = [];
  const rejects: PageRejectRow[] = [];
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
  await writePageRows(pool, { heads, messages, artifacts, owners, citations, rejects });
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
