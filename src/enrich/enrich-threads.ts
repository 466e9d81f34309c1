import type { Kysely } from 'kysely';
import type { HistoryEntry, ServiceClient } from '../api/index.ts';
import { statusOf } from '../api/index.ts';
import { present } from '../common/checked.ts';
import type { DriftNote } from '../common/schema-drift.ts';
import { CrsError, errorMessage, isCrsError } from '../errors.ts';
import { type Logger, redactText } from '../log.ts';
import { dbFailureKind } from '../warehouse/db-errors.ts';
import { failThread, readThreadStates, type ThreadState } from '../warehouse/enrichment.ts';
import { acceptedDriftPaths, type DriftCount, recordEntityDrift } from '../warehouse/schema-drift.ts';
import type { Database } from '../warehouse/types.ts';
import { parseArtifact } from './artifact.ts';
import { driftDetail, responseDrift } from './contract.ts';
import { type EnrichCounts, emptyEnrichCounts } from './counts.ts';
import { type ParsedEntry, parseHistoryEntry } from './history-entry.ts';
import type { PageWriter } from './page-group-commit.ts';
import { finishOnly, type RejectRow, type StoredArtifact } from './page-rows.ts';
import { rawText, storableText } from './storable.ts';
import type { ThreadNames } from './thread-names.ts';

export interface EnrichDeps {
  db: Kysely<Database>;
  /** Stores the history pages (and the end of each thread) in `db`. */
  pages: PageWriter;
  api: ServiceClient;
  log: Logger;
  names: ThreadNames;
  /** Threads of one batch enriched at once (the client's own limits still bound the requests). */
  concurrency: number;
  /** limit_num of history pages (default: the client's DEFAULT_PAGE_SIZE). */
  pageSize?: number;
  /** Attempts at a thread that keeps failing with a retryable error before it is marked 'failed'. */
  maxAttempts?: number;
  /**
   * CRS_RECORD_CONTRACT: `freeze` quarantines a history entry or an artifact that drifts from the
   * contract (`schema_drift`) instead of storing it; `evolve` (the default) stores it and notes
   * the drift.
   */
  schemaContract?: 'evolve' | 'freeze';
}

export const DEFAULT_MAX_THREAD_ATTEMPTS = 3;

export interface EnrichThreadsInput {
  threadIds: string[];
  loadId: string;
  signal?: AbortSignal;
  /**
   * Called after every stored page and every finished thread, with the counts so far: the
   * activity's heartbeat (progress, not a timer, so a stuck batch is noticed).
   */
  onProgress?: (counts: Readonly<EnrichCounts>) => void;
}

/** A final status, or a retryable failure (the thread stays pending) with its error code. */
type Outcome = 'done' | 'deleted' | 'forbidden' | 'failed' | { retry: CrsError['code'] };

/**
 * Enriches a batch of threads: for each, reads the history from one entry before the position
 * already stored (the entry there tells whether the history changed upstream; if it did, from 0),
 * page by page, storing messages, citations and the artifacts the entries name, each page with its
 * checkpoint in one transaction. A 404 marks the thread 'deleted', a 403
 * 'forbidden'; entries and artifacts that break the contract are quarantined and the rest of the
 * thread still loads. A thread that fails with a retryable error stays 'pending' (up to
 * maxAttempts, then 'failed'); when any did, the batch throws a retryable error at the end, after
 * every other thread is stored, so that Temporal retries it and only the failed ones do work.
 * An error the code did not expect on one thread fails that thread alone ('failed', the error in
 * last_error); only errors of the whole batch (cancellation, the warehouse) throw at once.
 */
export async function enrichThreads(deps: EnrichDeps, input: EnrichThreadsInput): Promise<EnrichCounts> {
  const counts = emptyEnrichCounts();
  // Names are needed only when a thread ends: the thread list is read while the first histories
  // are, not before them. A rejection (cancellation) is thrown below, after the workers.
  const names = deps.names.get(input.signal);
  names.catch(() => {});
  const states = await readThreadStates(deps.db, input.threadIds);
  const accepted: Accepted = {
    history: new Set(await acceptedDriftPaths(deps.db, 'history')),
    artifact: new Set(await acceptedDriftPaths(deps.db, 'artifact')),
    freeze: deps.schemaContract === 'freeze',
  };
  const retryLater: string[] = [];
  let retryCode: CrsError['code'] = 'HTTP_SERVER';
  let unauthorized = 0;
  const queue = input.threadIds.filter((id) => states.has(id));
  let firstError: unknown;

  async function worker(): Promise<void> {
    for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
      const state = present(states.get(id), `the state of thread ${id}`);
      counts.threads++;
      const outcome = await enrichThread(deps, state, names, input, counts, accepted).catch(
        (err: unknown) => {
          firstError ??= err;
          queue.length = 0;
          return { retry: 'CANCELLED' } as Outcome;
        },
      );
      if (typeof outcome === 'object') {
        retryLater.push(id);
        // HTTP_UNAUTHORIZED is never retried as an activity's failure type: such threads name
        // the cause in the message, and the batch is retried under the code of another, if any.
        if (outcome.retry === 'HTTP_UNAUTHORIZED') unauthorized++;
        else retryCode = outcome.retry;
      } else counts[outcome]++;
      input.onProgress?.(counts);
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, deps.concurrency) }, worker));
  await names;
  // Cancellation and warehouse failures stop the batch; Temporal decides what comes next.
  if (firstError !== undefined) throw firstError;
  if (retryLater.length > 0) {
    const why = unauthorized > 0 ? ` (${unauthorized} answered 401 even after a token refresh)` : '';
    throw new CrsError(
      retryCode,
      `enrichment of ${retryLater.length} thread(s) failed for now${why}; retrying`,
      {
        retryable: true,
        details: { retryLater: retryLater.length, ...counts },
      },
    );
  }
  return counts;
}

/**
 * One thread: read its history from the stored position, page by page, write each page, end it
 * with its final status (a failure: threadFailed). Long: the read loop, the upstream-rewrite
 * check that may restart it from 0, and the page write share the read position; apart, they would
 * hand it back and forth.
 */
async function enrichThread(
  deps: EnrichDeps,
  state: ThreadState,
  names: Promise<Map<string, string>>,
  input: EnrichThreadsInput,
  counts: EnrichCounts,
  accepted: Accepted,
): Promise<Outcome> {
  const { loadId, signal } = input;
  const threadId = state.thread_id;
  const log = deps.log.child({ threadId });
  if (state.enrich_status === 'deleted') return 'deleted';
  try {
    // The read starts one entry early: that entry, compared with what is stored at its position,
    // tells whether the history changed upstream (shortened, or rewritten) at no extra request.
    // When it did, the whole history is read again from 0 and the warehouse made equal to it.
    const stored = state.history_count;
    let rewrite = false;
    let check = stored > 0;
    read: for (;;) {
      const from = rewrite ? 0 : Math.max(0, stored - 1);
      for await (const page of deps.api.historyFrom(threadId, from, deps.pageSize, { signal })) {
        let entries = page.messages;
        let fromIndex = page.startIndex;
        if (check) {
          check = false;
          if (!sameTail(state, entries[0])) {
            // A warning: what follows deletes the stored rows the service no longer has.
            log.warn(
              { stored, received: entries.length === 0 ? 'none' : 'another entry' },
              'thread history changed upstream; reading it again from the start',
            );
            rewrite = true;
            continue read;
          }
          entries = entries.slice(1);
          fromIndex += 1;
        } else if (rewrite && page.startIndex === 0 && page.last && entries.length === 0) {
          // A thread the service still has, with no entry at all, is more likely a broken answer
          // than a history emptied on purpose: its rows are kept, and the thread fails for a person
          // to look at, rather than a bad day of the service emptying the warehouse.
          throw new CrsError(
            'HTTP_BAD_RESPONSE',
            `listMessages failed: the history came back empty, though ${stored} entries of it are stored; they are kept`,
            { details: { operation: 'listMessages', stored } },
          );
        }
        const drift: DriftCount[] = [];
        const { messages, rejects } = parsePage(threadId, entries, fromIndex, drift, accepted);
        const artifacts = await fetchArtifacts(deps, threadId, messages, rejects, signal, drift, accepted);
        // Before the page: should the page's write fail, the re-read notes the same entities again,
        // and an entity counts once however often it is noted.
        await recordEntityDrift(deps.db, drift);
        // The last page ends the thread in the same statement: one round trip fewer per thread.
        await deps.pages.write({
          threadId,
          loadId,
          messages,
          artifacts,
          rejects,
          nextIndex: page.nextIndex,
          // Outside a re-read, only positions up to the highest stored can hold stale rows (those
          // of a re-read that stopped part-way): an appended page has nothing to look for.
          ...(rewrite || fromIndex <= (state.max_position ?? -1)
            ? { covers: { fromIndex, toEnd: page.last } }
            : {}),
          ...(rewrite ? { rewrite } : {}),
          ...(page.last
            ? {
                finish: {
                  status: 'done',
                  requestedAt: state.requested_at,
                  name: (await names).get(threadId),
                },
              }
            : {}),
        });
        counts.messages += messages.length;
        counts.artifacts += artifacts.length;
        input.onProgress?.(counts);
        if (page.last) return 'done';
      }
      break;
    }
    // Only a history that ends without a short page (none of the client's) gets here.
    await deps.pages.write(
      finishOnly(threadId, loadId, {
        status: 'done',
        requestedAt: state.requested_at,
        name: (await names).get(threadId),
      }),
    );
    return 'done';
  } catch (err) {
    return await threadFailed(deps, state, names, input, log, err);
  }
}

/**
 * What a failed read or write makes of the thread: `deleted` on a 404, `forbidden` on a 403 (both
 * final); another API error uses up an attempt (or ends the thread `failed`); an error that
 * concerns the whole batch (a cancellation, the warehouse, the configuration) is thrown and ends
 * the batch; any other error, one the code did not expect on this thread, fails the thread alone.
 */
async function threadFailed(
  deps: EnrichDeps,
  state: ThreadState,
  names: Promise<Map<string, string>>,
  input: EnrichThreadsInput,
  log: Logger,
  err: unknown,
): Promise<Outcome> {
  const { loadId } = input;
  const threadId = state.thread_id;
  const status = statusOf(err);
  if (status === 404 || status === 403) {
    const outcome = status === 404 ? 'deleted' : 'forbidden';
    log.info({ status }, `thread ${outcome}`);
    await deps.pages.write(
      finishOnly(threadId, loadId, {
        status: outcome,
        requestedAt: state.requested_at,
        name: (await names).get(threadId),
        error: errorMessage(err),
      }),
    );
    return outcome;
  }
  if (!isCrsError(err) || !err.code.startsWith('HTTP_')) {
    if (concernsBatch(err, input.signal)) throw err;
    return await unexpectedFailure(deps, threadId, log, err);
  }
  // A 401 after the client's one refresh says the credentials or the token service failed,
  // not that the thread is bad: it uses up an attempt like a retryable error, so the thread is
  // tried again (a revoked credential shows as the same error on every thread meanwhile).
  const permanent = !err.retryable && err.code !== 'HTTP_UNAUTHORIZED';
  const now = await failThread(deps.db, threadId, {
    error: err.message,
    maxAttempts: deps.maxAttempts ?? DEFAULT_MAX_THREAD_ATTEMPTS,
    permanent,
    // Throttling is the service's state, never the thread's fault: it must not use up attempts.
    counts: err.code !== 'HTTP_THROTTLED',
  });
  log.warn({ code: err.code, status, enrichStatus: now }, 'thread enrichment failed');
  return now === 'failed' ? 'failed' : { retry: err.code };
}

/**
 * Whether an error that is no API answer concerns the whole batch rather than the thread it met:
 * a cancellation, the warehouse (a lost connection, a timeout, a statement it refused; the shared
 * request budget lives there too), a CrsError the code raised on purpose (a setting or a
 * credential missing). Those fail the batch, and Temporal retries it. What is left (a TypeError,
 * a RangeError: no code, no SQLSTATE) is a defect meeting this thread's data: the retried batch
 * would meet it again, every time, and no other thread of it would ever be enriched.
 */
function concernsBatch(err: unknown, signal: AbortSignal | undefined): boolean {
  if (signal?.aborted || isCrsError(err) || dbFailureKind(err) !== undefined) return true;
  // pg's errors carry their SQLSTATE, Node's system errors their errno name, aborts ABORT_ERR.
  return typeof (err as { code?: unknown } | null)?.code === 'string';
}

/** Most characters of an unexpected error kept in `last_error`. */
const MAX_UNEXPECTED_ERROR = 500;

/**
 * A thread whose enrichment met an error the code did not expect: `failed` at once (the same data
 * would fail it again), the error in `last_error`; what its pages stored so far stays. A load that
 * touches the thread again queues it again, as does an operator (docs/operations.md).
 */
async function unexpectedFailure(
  deps: EnrichDeps,
  threadId: string,
  log: Logger,
  err: unknown,
): Promise<Outcome> {
  // A library's message may quote what it was given: masked, and bounded.
  const what = redactText(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
  const error = `unexpected error while enriching the thread: ${what}`;
  await failThread(deps.db, threadId, {
    error: storableText(
      error.length > MAX_UNEXPECTED_ERROR ? `${error.slice(0, MAX_UNEXPECTED_ERROR - 1)}…` : error,
    ),
    maxAttempts: deps.maxAttempts ?? DEFAULT_MAX_THREAD_ATTEMPTS,
    permanent: true,
    counts: true,
  });
  log.error(
    { err },
    'thread enrichment failed on an unexpected error; the thread is failed, the batch goes on',
  );
  return 'failed';
}

/**
 * The entries of one page as message rows and quarantine rows. One statement cannot upsert the
 * same key twice, so an id repeated within the page is quarantined.
 */
function parsePage(
  threadId: string,
  entries: readonly HistoryEntry[],
  fromIndex: number,
  drift: DriftCount[],
  accepted: Accepted,
): { messages: Array<{ position: number; entry: ParsedEntry }>; rejects: RejectRow[] } {
  const messages: Array<{ position: number; entry: ParsedEntry }> = [];
  const rejects: RejectRow[] = [];
  const ids = new Set<string>();
  entries.forEach((raw: HistoryEntry, i) => {
    const position = fromIndex + i;
    let r = parseHistoryEntry(raw);
    // The contract's own checks first (their codes say more); then the drift, noted only of an
    // entry that passed them: a quarantined entry's fields are not what the service sends.
    if (r.ok) {
      const drifted = noteDrift(
        drift,
        'history',
        raw,
        `thread/${threadId}/message/${messageKey(raw, position)}`,
        accepted.history,
        accepted.freeze,
      );
      if (drifted !== undefined) r = { ok: false, code: 'schema_drift', reason: drifted };
    }
    if (r.ok && ids.has(r.value.message_id)) {
      r = {
        ok: false,
        code: 'history_duplicate_message_id',
        reason: 'message_id repeats an earlier entry of the page',
      };
    }
    if (r.ok) {
      ids.add(r.value.message_id);
      messages.push({ position, entry: r.value });
    } else
      rejects.push({
        source: 'history',
        sourceName: `thread/${threadId}`,
        lineNo: position,
        raw: rawText(raw),
        code: r.code,
        detail: r.reason,
      });
  });
  return { messages, rejects };
}

/** Paths of drift operators accepted, per thread-API source (read once per batch), and the mode. */
interface Accepted {
  history: ReadonlySet<string>;
  artifact: ReadonlySet<string>;
  /** CRS_RECORD_CONTRACT=freeze: drift not accepted quarantines the entry or artifact. */
  freeze: boolean;
}

const notes: DriftNote[] = [];

/**
 * A response's drift as one count for its entity (`scope`), seen today. Under `freeze`, returns
 * the quarantine detail naming the drifted fields when there are any (undefined otherwise).
 */
function noteDrift(
  out: DriftCount[],
  source: 'history' | 'artifact',
  value: unknown,
  scope: string,
  accepted: ReadonlySet<string>,
  freeze: boolean,
): string | undefined {
  responseDrift(source, value, notes, accepted);
  if (notes.length === 0) return undefined;
  const day = new Date().toISOString().slice(0, 10);
  for (const note of notes) out.push({ note, scope, day, count: 1 });
  const detail = freeze ? driftDetail(source === 'history' ? 'history entry' : 'artifact', notes) : undefined;
  notes.length = 0;
  return detail;
}

/** An entry's id when it has one in UUID form, else its position: what identifies it in a count. */
function messageKey(entry: unknown, position: number): string {
  const id = isObject(entry) ? entry.message_id : undefined;
  return typeof id === 'string' && UUID.test(id) ? id.toLowerCase() : `#${position}`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Whether `entry`, received for position history_count − 1, is the entry stored there: the same
 * message_id, or, for an entry that was quarantined, the same raw text (or, should the quarantine
 * have kept a different rendering of it, the same message_id in it). Nothing received there
 * means the service now has fewer entries than were stored.
 */
export function sameTail(
  state: Pick<ThreadState, 'tail_message_id' | 'tail_rejected_raw'>,
  entry: unknown,
): boolean {
  if (entry === undefined) return false;
  const id =
    isObject(entry) && typeof entry.message_id === 'string' ? entry.message_id.toLowerCase() : undefined;
  if (state.tail_message_id !== null) return id === state.tail_message_id;
  const kept = state.tail_rejected_raw;
  if (kept === null) return false;
  // The quarantine's own rendering: JSON.stringify would throw on an entry nested too deep.
  if (kept === rawText(entry)) return true;
  if (id === undefined) return false;
  try {
    const parsed: unknown = JSON.parse(kept);
    return (
      isObject(parsed) && typeof parsed.message_id === 'string' && parsed.message_id.toLowerCase() === id
    );
  } catch {
    return false;
  }
}

/**
 * Fetches the artifacts the page's entries name. An artifact the service does not have (404),
 * refuses (403, 422) or that breaks the contract is quarantined; other errors fail the thread.
 */
async function fetchArtifacts(
  deps: EnrichDeps,
  threadId: string,
  messages: Array<{ position: number; entry: ParsedEntry }>,
  rejects: RejectRow[],
  signal: AbortSignal | undefined,
  drift: DriftCount[],
  accepted: Accepted,
): Promise<StoredArtifact[]> {
  // An artifact named by several entries of the page is fetched once, for the first of them.
  const seen = new Set<string>();
  const wanted = messages
    .flatMap(({ position, entry }) =>
      entry.artifact_ids.map((artifactId) => ({ artifactId, position, messageId: entry.message_id })),
    )
    .filter((w) => !seen.has(w.artifactId) && seen.add(w.artifactId));
  const results = await Promise.all(
    wanted.map(async (w) => {
      const reject = (code: string, detail: string, raw: string): undefined => {
        rejects.push({
          source: 'artifact',
          sourceName: `thread/${threadId}/artifact/${w.artifactId}`,
          lineNo: w.position,
          raw,
          code,
          detail,
        });
        return undefined;
      };
      try {
        const got = await deps.api.getArtifact(threadId, w.artifactId, { signal });
        const parsed = parseArtifact(got.artifact);
        if (!parsed.ok) return reject(parsed.code, parsed.reason, rawText(got.artifact));
        // As for an entry: drift only of an artifact that passed the contract's checks.
        const drifted = noteDrift(
          drift,
          'artifact',
          got.artifact,
          `thread/${threadId}/artifact/${w.artifactId}`,
          accepted.artifact,
          accepted.freeze,
        );
        if (drifted !== undefined) return reject('schema_drift', drifted, rawText(got.artifact));
        return {
          artifactId: w.artifactId,
          messageId: w.messageId,
          fetchedVia: got.fetched_via,
          parsed: parsed.value,
        };
      } catch (err) {
        const status = statusOf(err);
        if (isCrsError(err) && (status === 404 || status === 422 || err.code === 'HTTP_BAD_RESPONSE')) {
          return reject(
            err.code,
            err.message,
            JSON.stringify({ thread_id: threadId, artifact_id: w.artifactId }),
          );
        }
        throw err;
      }
    }),
  );
  return results.filter((r): r is StoredArtifact => r !== undefined);
}
