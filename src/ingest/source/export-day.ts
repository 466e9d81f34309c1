import { createHash } from 'node:crypto';
import { type ExportBody, notAnExport, type ServiceClient } from '../../api/index.ts';
import { type LoadCounts, pickCounts } from '../../common/counts.ts';
import type { DayLoad } from '../../common/load-target.ts';
import type { Config } from '../../config.ts';
import { CrsError, errorMessage, isCrsError } from '../../errors.ts';
import { type Logger, redactText } from '../../log.ts';
import type { Warehouse } from '../../warehouse/db.ts';
import {
  type LoadAttempt,
  markDayRunning,
  recordDayDownload,
  releaseUnfinishedDay,
} from '../../warehouse/ledger.ts';
import { type LoadProgress, loaderSettings, runLoad } from '../merge/load.ts';

/**
 * One UTC day of the analytics export into the warehouse: the unit of work of the sync.
 *
 * The day's export (start_date = end_date = the day; spec §4.12) is the complete set of that
 * day's records, so rows of the day it no longer holds are marked deleted afterwards. The
 * deletes are applied only when the download is known to be the whole export (see
 * ExportBody.incompleteReason: an error page sent with status 200, an empty body or one cut at a
 * line boundary deletes nothing, and the ledger says why), and only up to CRS_DELETE_GUARD. The
 * checkpoint key is the load id (the run id plus the day, load-target.ts): a retry of the same load (a Temporal activity
 * retry, a worker killed mid-day) resumes from the last committed batch; a new load of the day
 * starts from its first line and leaves unchanged rows untouched.
 */

export interface ExportDayDeps {
  warehouse: Warehouse;
  client: ServiceClient;
  config: Config;
  log: Logger;
}

export interface ExportDayInput {
  /**
   * The day and its run. An open day's (an intraday pull) export so far is loaded, but it is not
   * the day's whole set, so nothing of the day is deleted and the ledger marks it `partial`
   * (finalize.ts).
   */
  target: DayLoad;
  /** False: a partial pull merges every line, none skipped as known (load.ts `knownLines`; bench:intraday compares). */
  knownLines?: boolean;
  /**
   * Which attempt of a load Temporal runs and retries (activities/index.ts): recorded in the
   * ledger, and a failure is left to the caller, which knows whether another attempt follows.
   * Without it (a direct call) nothing retries the load: a failure releases the day at once.
   */
  attempt?: LoadAttempt;
  signal?: AbortSignal;
  onProgress?: (p: LoadProgress) => void;
}

export interface ExportDaySummary extends LoadCounts {
  day: string;
  /** The run's id (the `_load_id` of the rows it wrote). */
  runId: string;
  /** Deletes held for review by the guard (`crs-sync deletes`). */
  deletesHeld?: number;
  /** Why the export was not known complete (nothing deleted); null when it was. */
  incompleteReason?: string | null;
  resumedFromLine: number;
  /** Times the export stream was cut and requested again. */
  reopens: number;
  elapsedMs: number;
}

export async function loadExportDay(deps: ExportDayDeps, input: ExportDayInput): Promise<ExportDaySummary> {
  const { warehouse, client, config } = deps;
  const { target } = input;
  const { day, runId } = target;
  const open = target.kind === 'open-day';
  const log = deps.log.child({ day, runId });
  const { takenOverFrom } = await markDayRunning(warehouse.db, day, runId, input.attempt);
  if (takenOverFrom)
    log.warn({ takenOverFrom }, 'the day was left running by a load that is gone; this load takes it over');
  // The digest of the last complete download: two equal checksums mean the export of the day
  // did not change between loads.
  let checksum: string | null = null;
  // The download the load read to its end: every reopen reads the whole export again.
  let body: ExportBody | null = null;
  try {
    const summary = await runLoad({
      warehouse,
      log,
      target,
      open: async () => {
        body = null;
        body = await openExport(client, day, input.signal);
        // An intraday pull records no checksum: its export is the open day so far, which the
        // next pull reads again whole, and hashing all of it at every pull cost the loader nearly
        // as much as the sha1 of its lines. The closed-day pull records the day's.
        if (open) return body;
        return hashing(body, (digest) => {
          checksum = digest;
        });
      },
      ...loaderSettings(config),
      ...(input.knownLines === false ? { knownLinesMax: 0 } : {}),
      incompleteReason: () => (body ? body.incompleteReason : 'the export was not downloaded'),
      ...(input.signal ? { signal: input.signal } : {}),
      ...(input.onProgress ? { onProgress: input.onProgress } : {}),
    });
    await recordDayDownload(warehouse.db, day, { checksum, bytes: summary.bytesRead });
    const ledger = summary.days.find((d) => d.day === day);
    logDayLoaded(log, summary, open ? { ...ledger, incompleteReason: null, deletesHeld: 0 } : ledger);
    return {
      day,
      runId,
      ...pickCounts(summary),
      deletesHeld: ledger?.deletesHeld ?? 0,
      incompleteReason: ledger?.incompleteReason ?? null,
      resumedFromLine: summary.resumedFromLine,
      reopens: summary.reopens,
      elapsedMs: summary.elapsedMs,
    };
  } catch (err) {
    if (input.attempt === undefined) {
      const cancelled = isCrsError(err) && err.code === 'CANCELLED';
      await releaseUnfinishedDay(warehouse.db, day, {
        cancelled,
        reason: cancelled ? 'cancelled before the day completed' : redactText(errorMessage(err)),
        code: isCrsError(err) ? err.code : null,
        ...(open ? { partial: true } : {}),
      }).catch(() => {});
    }
    throw err;
  }
}

/**
 * Asks for the export of one day. An answer that is not JSONL (an error or maintenance page sent
 * with status 200) is cancelled unread and thrown as retryable: the reopen loop asks again after
 * a pause, then the activity's retries do.
 */
async function openExport(
  client: ServiceClient,
  day: string,
  signal: AbortSignal | undefined,
): Promise<ExportBody> {
  const body = await client.exportMessages({ startDate: day, endDate: day, ...(signal ? { signal } : {}) });
  const other = notAnExport(body.contentType);
  if (other === null) return body;
  await body.cancel();
  throw new CrsError(
    'EXPORT_NOT_JSONL',
    `the export of ${day} answered 200 with content type ${JSON.stringify(other)}, not JSONL (an error or maintenance page?); nothing of it was loaded`,
    { retryable: true, details: { contentType: other } },
  );
}

/** The day's figures in the log, with a warning for what an operator should look at. */
function logDayLoaded(
  log: Logger,
  counts: LoadCounts,
  ledger: { incompleteReason: string | null; deletesHeld: number } | undefined,
): void {
  if (ledger?.incompleteReason) {
    log.warn({ reason: ledger.incompleteReason }, 'export not known complete: no row of the day deleted');
  }
  if (ledger?.deletesHeld) {
    log.warn(
      { deletesHeld: ledger.deletesHeld },
      'deletes held by CRS_DELETE_GUARD: review with crs-sync deletes list',
    );
  }
  log.info(
    {
      rows: counts.rowsRead,
      inserted: counts.inserted,
      updated: counts.updated,
      rejected: counts.rejected,
      deleted: counts.deleted,
      ...(ledger?.deletesHeld ? { deletesHeld: ledger.deletesHeld } : {}),
      ...(ledger?.incompleteReason ? { incompleteReason: ledger.incompleteReason } : {}),
    },
    'export day loaded',
  );
}

async function* hashing(
  source: AsyncIterable<Uint8Array>,
  done: (hex: string) => void,
): AsyncGenerator<Uint8Array> {
  const h = createHash('sha256');
  for await (const chunk of source) {
    h.update(chunk);
    yield chunk;
  }
  done(h.digest('hex'));
}
