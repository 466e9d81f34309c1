import type { Kysely } from 'kysely';
import type { ServiceClient } from '../api/index.ts';
import type { DriftNote } from '../common/schema-drift.ts';
import { errorMessage } from '../errors.ts';
import { type Logger, redactText } from '../log.ts';
import { applyThreadList, recordThreadListRead } from '../warehouse/enrichment.ts';
import { acceptedDriftPaths, type DriftCount, recordEntityDrift } from '../warehouse/schema-drift.ts';
import type { Database } from '../warehouse/types.ts';
import { responseDrift } from './contract.ts';
import { storableText } from './storable.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Thread names from GET /v2/threads (the spec shows no paging, so it is one request for all),
 * fetched at most once per `ttlMs` and shared by every batch of the worker. Each fetch also
 * writes the names to the warehouse and re-queues threads whose history grew since they were
 * enriched. A failing list is logged, counted in the warehouse (`thread_list_reads`: `crs-sync
 * status`, the `enrichment_stalled` alert) and names stay as they were: enrichment goes on.
 */
export interface ThreadNames {
  get(signal?: AbortSignal): Promise<Map<string, string>>;
}

export const DEFAULT_THREAD_LIST_TTL_MS = 5 * 60_000;

/** Most characters of a failed read's error kept in the warehouse. */
const MAX_ERROR = 500;

/** The thread list's schema drift, one count per thread (`thread/<id>`) however often it is listed. */
async function recordListDrift(db: Kysely<Database>, list: readonly unknown[]): Promise<void> {
  const accepted = new Set(await acceptedDriftPaths(db, 'thread'));
  const notes: DriftNote[] = [];
  const out: DriftCount[] = [];
  const day = new Date().toISOString().slice(0, 10);
  list.forEach((t, i) => {
    responseDrift('thread', t, notes, accepted);
    if (notes.length === 0) return;
    const id = (t as { thread_id?: unknown }).thread_id;
    const scope = `thread/${typeof id === 'string' ? id.toLowerCase() : `#${i}`}`;
    for (const note of notes) out.push({ note, scope, day, count: 1 });
    notes.length = 0;
  });
  await recordEntityDrift(db, out);
}

export function createThreadNames(
  api: ServiceClient,
  db: Kysely<Database>,
  log: Logger,
  ttlMs = DEFAULT_THREAD_LIST_TTL_MS,
): ThreadNames {
  let cached: { at: number; names: Map<string, string> } | undefined;
  let inflight: Promise<Map<string, string>> | undefined;

  async function load(signal?: AbortSignal): Promise<Map<string, string>> {
    try {
      const list = await api.listThreads({ signal });
      await recordListDrift(db, list);
      const entries = list
        .filter((t) => UUID.test(t.thread_id))
        .map((t) => ({
          thread_id: t.thread_id.toLowerCase(),
          // One name PostgreSQL cannot store would fail the whole list's update.
          name: typeof t.thread_name === 'string' ? storableText(t.thread_name) : null,
          count: Number.isSafeInteger(t.message_count) ? (t.message_count as number) : null,
        }));
      const r = await applyThreadList(db, entries);
      if (r.requeued > 0) log.info({ requeued: r.requeued }, 'threads whose history grew were queued again');
      const names = new Map<string, string>();
      for (const e of entries) if (e.name !== null) names.set(e.thread_id, e.name);
      cached = { at: Date.now(), names };
      await noteRead();
      return names;
    } catch (err) {
      if ((err as { code?: unknown } | null)?.code === 'CANCELLED') throw err;
      log.warn({ error: errorMessage(err) }, 'thread list unavailable; thread names not updated');
      await noteRead({ err });
      return cached?.names ?? new Map();
    }
  }

  /**
   * The read's outcome in the warehouse, for `crs-sync status` and the alert (a failing list
   * would otherwise show in this log only). Never fails the read: a warehouse that cannot take it
   * fails the batch's own writes soon enough.
   */
  async function noteRead(failed?: { err: unknown }): Promise<void> {
    // storableText after the cut: a cut between a surrogate pair leaves a lone one.
    const error = failed && storableText(redactText(errorMessage(failed.err)).slice(0, MAX_ERROR));
    await recordThreadListRead(db, error).catch((e: unknown) => {
      log.warn({ error: errorMessage(e) }, 'the outcome of the thread-list read could not be stored');
    });
  }

  return {
    get(signal) {
      if (cached && Date.now() - cached.at < ttlMs) return Promise.resolve(cached.names);
      inflight ??= load(signal).finally(() => {
        inflight = undefined;
      });
      return inflight;
    },
  };
}
