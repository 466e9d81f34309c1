import type { Kysely } from 'kysely';
import type { ServiceClient } from '../api/index.ts';
import type { DriftNote } from '../common/schema-drift.ts';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../log.ts';
import { applyThreadList } from '../warehouse/enrichment.ts';
import { acceptedDriftPaths, type DriftCount, recordEntityDrift } from '../warehouse/schema-drift.ts';
import type { Database } from '../warehouse/types.ts';
import { responseDrift } from './contract.ts';
import { storableText } from './storable.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Thread names from GET /v2/threads (the spec shows no paging, so it is one request for all),
 * fetched at most once per `ttlMs` and shared by every batch of the worker. Each fetch also
 * writes the names to the warehouse and re-queues threads whose history grew since they were
 * enriched. A failing list is logged and names stay unknown: enrichment does not depend on it.
 */
export interface ThreadNames {
  get(signal?: AbortSignal): Promise<Map<string, string>>;
}

export const DEFAULT_THREAD_LIST_TTL_MS = 5 * 60_000;

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
      return names;
    } catch (err) {
      if ((err as { code?: unknown }).code === 'CANCELLED') throw err;
      log.warn({ error: errorMessage(err) }, 'thread list unavailable; thread names not updated');
      return cached?.names ?? new Map();
    }
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
