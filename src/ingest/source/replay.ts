import { Readable } from 'node:stream';
import { fileLoad } from '../../common/load-target.ts';
import type { Config } from '../../config.ts';
import type { Logger } from '../../log.ts';
import type { Warehouse } from '../../warehouse/db.ts';
import { closeRun, startRun } from '../../warehouse/ledger.ts';
import {
  listRejects,
  markReplayed,
  noteReplayResult,
  type RejectFilter,
  recordReplay,
  rejectsByLine,
} from '../../warehouse/quarantine.ts';
import { acceptedDriftPaths } from '../../warehouse/schema-drift.ts';
import { requeueThreads } from '../../warehouse/threads.ts';
import type { RejectedRecord } from '../../warehouse/types.ts';
import { loaderSettings, runLoad } from '../merge/load.ts';
import { splitLines } from '../parse/line-splitter.ts';
import { exportContract, parseRecord, rejectCodeForLineProblem } from '../parse/record-parser.ts';

/**
 * Replays quarantined rows once their cause is fixed (a parser change, a relaxed contract).
 *
 * Export and file lines go through the same loader again as a `replay` run, from their exact
 * bytes. A line that loads is marked replayed; one that fails again stays open with the new
 * reason in replay_result (no second quarantine row), the replay counted as a load that read it. A line kept only as a prefix (over the
 * line limit) cannot be replayed. History and artifact rejects re-queue their thread and rewind
 * its stored history position to the rejected entry (for an artifact, the entry naming it), so
 * enrichment reads it again.
 */
export type ReplayFilter = RejectFilter;

export interface ReplayResult {
  replayLoadId: string | null;
  selected: number;
  /** Lines loaded (with dryRun: lines the current parser and contract would load). */
  loaded: number;
  /** Lines rejected again (with dryRun: that would be). */
  stillRejected: number;
  /** stillRejected by the code of the reject they get now (would get, with dryRun). */
  stillRejectedByCode: Record<string, number>;
  notReplayable: number;
  /** Threads re-queued (with dryRun: that would be). */
  threadsRequeued: number;
  dryRun: boolean;
}

export async function replayRejects(
  w: Warehouse,
  config: Config,
  log: Logger,
  filter: ReplayFilter,
  opts: { dryRun?: boolean } = {},
): Promise<ReplayResult> {
  const rows = await listRejects(w.db, { ...filter, limit: filter.limit ?? 100_000 }, { oldestFirst: true });

  const lines = rows.filter(
    (r) => (r.source === 'export' || r.source === 'file') && r.error_code !== 'line_too_long',
  );
  const prefixOnly = rows.filter((r) => r.error_code === 'line_too_long');
  const threadRows = rows.filter((r) => (r.source === 'history' || r.source === 'artifact') && r.thread_id);
  const result: ReplayResult = {
    replayLoadId: null,
    selected: rows.length,
    loaded: 0,
    stillRejected: 0,
    stillRejectedByCode: {},
    notReplayable: prefixOnly.length,
    threadsRequeued: 0,
    dryRun: opts.dryRun === true,
  };
  if (opts.dryRun) {
    const judged = await judgeLines(w, config, lines);
    result.stillRejectedByCode = judged.byCode;
    result.stillRejected = Object.values(judged.byCode).reduce((a, b) => a + b, 0);
    result.loaded = lines.length - result.stillRejected;
    result.threadsRequeued = new Set(threadRows.map((r) => r.thread_id)).size;
    return result;
  }

  await noteReplayResult(
    w.db,
    prefixOnly.map((r) => r.id),
    'not replayable: only a prefix of the over-long line was kept',
  );

  if (lines.length > 0) await replayLines(w, config, log, lines, rows[0]?.id, result);

  if (threadRows.length > 0) result.threadsRequeued = await requeueFromRejects(w, threadRows);
  return result;
}

/** Loads the rejected lines again as a `replay` run and records each one's outcome into `result`. */
async function replayLines(
  w: Warehouse,
  config: Config,
  log: Logger,
  lines: readonly RejectedRecord[],
  firstId: string | undefined,
  result: ReplayResult,
): Promise<void> {
  const loadId = `replay-${new Date()
    .toISOString()
    .replace(/[-:.TZ]/g, '')
    .slice(0, 14)}-${firstId}`;
  result.replayLoadId = loadId;
  const body = replayBody(lines);
  await startRun(w.db, { runId: loadId, kind: 'replay', source: 'rejected_records' });
  const summary = await runLoad({
    warehouse: w,
    log,
    target: fileLoad(loadId, 'replay'),
    open: async () => Readable.from([body]),
    ...loaderSettings(config),
    parts: 1,
    // Its lines that fail again are reported against the rejects they came from (recordReplay).
    rejectsPerLoad: true,
  });
  const failedAgain = await rejectsByLine(w.db, loadId);
  for (const why of failedAgain.values()) {
    const code = why.slice(0, why.indexOf(':'));
    result.stillRejectedByCode[code] = (result.stillRejectedByCode[code] ?? 0) + 1;
  }
  await w.db.transaction().execute((trx) =>
    recordReplay(
      trx,
      loadId,
      lines.map((r, i) => ({ id: r.id, failedAgain: failedAgain.get(i + 1) })),
    ),
  );
  result.stillRejected = failedAgain.size;
  result.loaded = lines.length - failedAgain.size;
  // No complete days: a replay deletes nothing, so its deleted count is 0.
  await closeRun(w.db, loadId, 'succeeded', summary);
}

/** The rejected lines as one source, a line each, in the order given: what a replay loads. */
function replayBody(lines: readonly RejectedRecord[]): Buffer {
  return Buffer.concat(
    lines.flatMap((r) => [
      r.raw_bytes ?? Buffer.from(r.raw.replaceAll('\n', ' '), 'utf8'),
      Buffer.from('\n'),
    ]),
  );
}

/**
 * What a replay of `lines` would do, without writing: each line read as the loader reads it (the
 * line splitter, then the parser under the contract the loader would use now: CRS_RECORD_CONTRACT
 * and the accepted drift), counted by the code of the reject it would get again.
 */
async function judgeLines(
  w: Warehouse,
  config: Config,
  lines: readonly RejectedRecord[],
): Promise<{ byCode: Record<string, number> }> {
  const byCode: Record<string, number> = {};
  const count = (code: string) => {
    byCode[code] = (byCode[code] ?? 0) + 1;
  };
  if (lines.length === 0) return { byCode };
  const contract = exportContract({
    freeze: config.schemaContract === 'freeze',
    accepted: await acceptedDriftPaths(w.db, 'export'),
  });
  const source = Readable.from([replayBody(lines)]);
  for await (const batch of splitLines(source, { maxLineBytes: config.maxLineBytes })) {
    for (const line of batch) {
      if (line.problem) {
        count(rejectCodeForLineProblem(line.problem));
        continue;
      }
      const parsed = parseRecord((line.bytes ?? Buffer.alloc(0)).toString('utf8'), {
        fromUtf8: true,
        contract,
      });
      if (!parsed.ok) count(parsed.code);
    }
  }
  return { byCode };
}

/**
 * Re-queues the threads of history and artifact rejects, each rewound to its earliest rejected
 * history entry (or entry naming a rejected artifact), and marks those rejects replayed, in one transaction; returns how many threads.
 */
async function requeueFromRejects(w: Warehouse, threadRows: readonly RejectedRecord[]): Promise<number> {
  const rewind = new Map<string, number>();
  for (const { source, line_no, thread_id } of threadRows) {
    if (thread_id === null) continue;
    // An artifact's line_no is the position of the entry naming it: read from there, the entry
    // names it again and it is fetched again (a `schema_drift` artifact after `schema accept`).
    const pos =
      (source === 'history' || source === 'artifact') && line_no !== null
        ? line_no
        : Number.POSITIVE_INFINITY;
    rewind.set(thread_id, Math.min(rewind.get(thread_id) ?? Number.POSITIVE_INFINITY, pos));
  }
  await w.db.transaction().execute(async (trx) => {
    await requeueThreads(trx, rewind);
    await markReplayed(
      trx,
      threadRows.map((r) => r.id),
      'thread re-queued for enrichment',
    );
  });
  return rewind.size;
}
