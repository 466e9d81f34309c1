import { Context } from '@temporalio/activity';
import { ApplicationFailure, type RetryPolicy } from '@temporalio/common';
import type {
  Activities,
  AwaitWorkflowInput,
  BeginRunInput,
  DayLoadedSinceInput,
  DayLoadInput,
  EndRunInput,
  EnrichBatchInput,
  PendingThreadsInput,
  PlanInput,
  PlanResult,
  ReleaseDayInput,
  WorkerSettings,
} from '../contract/activities.ts';
import { type EnrichCounts, type LoadCounts, pickCounts } from '../contract/counts.ts';
import { type DayLoad, dayLoadOf } from '../contract/load-target.ts';
import type { DayResult } from '../contract/workflows.ts';
import type { ServiceClient } from '../src/api/index.ts';
import type { Config } from '../src/config.ts';
import { createEnrichOps } from '../src/enrich/index.ts';
import { errorMessage } from '../src/errors.ts';
import { loadExportDay } from '../src/ingest/source/export-day.ts';
import type { Logger } from '../src/log.ts';
import { countDayFailed, countDayLoad, countEnrichBatch } from '../src/metrics/pipeline.ts';
import type { Warehouse } from '../src/warehouse/db.ts';
import {
  closeRun,
  findDayCompletedSince,
  type LoadAttempt,
  recordDayRetry,
  releaseUnfinishedDay,
  startRun,
  touchRun,
} from '../src/warehouse/ledger.ts';
import { planWindow } from '../src/warehouse/sync-window.ts';
import { attemptEnd, failureCode, loadRetryPolicy, maxAttemptsOf } from './attempts.ts';
import { awaitWorkflowResult } from './await-workflow.ts';
import { toFailure } from './failures.ts';
import type { DayLoadProgress, SyncOps } from './ops.ts';
import { createProgressBeat, type ProgressBeat } from './progress-beat.ts';
import { createSemaphore } from './semaphore.ts';

export interface ActivityDeps {
  warehouse: Warehouse;
  /** The service client (src/api); the real ops use it, the activities never pass it on. */
  client: ServiceClient;
  config: Config;
  log: Logger;
  /** Replaces the loader or the enrichment (tests that run without the service). */
  ops?: Partial<SyncOps>;
  /**
   * Day loads running at once in this worker (default 2). Each holds CRS_LOAD_PARTITIONS
   * database connections for its whole length, so the pool is sized from this, and loads beyond
   * it wait here (heartbeating) instead of timing out on the pool.
   */
  maxDayLoads?: number;
}

export const DEFAULT_MAX_DAY_LOADS = 2;

/**
 * The activities of crs-sync (their names and types: contract/activities.ts), built from the
 * worker's dependencies. Arguments and results are dates, ids and counts; credentials stay in
 * `deps` on the worker. Long: one closure on purpose,
 * as every activity shares the worker's deps, the day-load semaphore and the liveness writer, and
 * each stays short (argument checks, heartbeat, one call into src, errors mapped).
 */
export function createActivities(deps: ActivityDeps): Activities {
  const { warehouse, config, log } = deps;
  const db = warehouse.db;
  const ops: Partial<SyncOps> = { ...realOps(deps), ...(deps.ops ?? {}) };
  const dayLoads = createSemaphore(deps.maxDayLoads ?? DEFAULT_MAX_DAY_LOADS);
  const alive = livenessWriter(warehouse, log);

  function need<K extends keyof SyncOps>(k: K): SyncOps[K] {
    const f = ops[k];
    if (!f) throw ApplicationFailure.nonRetryable(`this worker has no ${k} implementation`, 'CONFIG_INVALID');
    return f;
  }

  /** How a long activity heartbeats (see progress-beat.ts); its stall clock starts now. */
  const progressBeat = () => createProgressBeat({ stallMs: config.stallTimeoutMs });

  async function guarded<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      throw toFailure(err);
    }
  }

  return {
    async planSyncWindow(input: PlanInput): Promise<PlanResult> {
      return guarded(async () => {
        const plan = await planWindow(db, {
          lookbackDays: config.lookbackDays,
          now: new Date(input.now),
          ...(input.from ? { from: input.from } : {}),
          ...(input.to ? { to: input.to } : {}),
        });
        return { ...plan, enrichConcurrency: config.enrichConcurrency };
      });
    },

    async workerSettings(): Promise<WorkerSettings> {
      return { enrichConcurrency: config.enrichConcurrency };
    },

    async beginRun(input: BeginRunInput): Promise<void> {
      const { abandoned } = await guarded(() =>
        startRun(db, {
          loadId: input.loadId,
          kind: input.kind,
          windowStart: input.from,
          windowEnd: input.to,
          workflowId: input.workflowId,
        }),
      );
      if (abandoned.length > 0)
        log.warn({ loadId: input.loadId, abandoned }, 'runs with no sign of life marked abandoned');
    },

    async endRun(input: EndRunInput): Promise<void> {
      await guarded(() => closeRun(db, input.loadId, input.status, input.totals, input.error));
    },

    /**
     * Loads one day of the export. The loader commits data and its checkpoint together and, run
     * again with the same load id, resumes from the stored checkpoint; the heartbeat carries the
     * same checkpoint so the UI shows progress and a stalled worker is detected.
     */
    async loadExportDay(input: DayLoadInput): Promise<LoadCounts> {
      const target = dayLoadOf(input);
      const ctx = Context.current();
      const resumedFrom = ctx.info.heartbeatDetails as DayLoadProgress | undefined;
      const alog = log.child({ day: target.day, runId: target.runId, attempt: ctx.info.attempt });
      if (resumedFrom) alog.info({ resumedFrom }, 'resuming the day load from its checkpoint');
      // Temporal's attempt number is the day's one count of attempts: the ledger, status, the
      // alert and the metrics all take it from here.
      const policy = loadRetryPolicy(ctx.info.retryPolicy);
      const attempt: LoadAttempt = { number: ctx.info.attempt, maxAttempts: maxAttemptsOf(policy) };
      return guarded(async () => {
        // Waiting for a slot heartbeats too, so a long wait is not taken for a dead worker.
        const release = await whileBeating(
          () => {
            alive(target.runId);
            return resumedFrom;
          },
          () => dayLoads.acquire(ctx.cancellationSignal),
        );
        try {
          return await loadOnce();
        } catch (err) {
          const failure = toFailure(err);
          await closeFailedAttempt(db, alog, target, { attempt, policy, failure });
          throw failure;
        } finally {
          release();
        }
      });
      async function loadOnce(): Promise<LoadCounts> {
        let last: DayLoadProgress | undefined = resumedFrom;
        const beat = progressBeat();
        beat.moved(last);
        const s = await whileBeating(
          () => {
            alive(target.runId, target.day);
            return last;
          },
          () =>
            need('loadDay')({
              target,
              attempt,
              signal: ctx.cancellationSignal,
              onProgress: (p) => {
                last = { linesCommitted: p.linesCommitted, rowsRead: p.rowsRead, bytesRead: p.bytesRead };
                if (beat.moved(last)) ctx.heartbeat(last);
                alive(target.runId, target.day);
              },
            }),
          beat,
        );
        // Only the counts go into the workflow's history (not the loader's diagnostics).
        const counts = pickCounts(s);
        countDayLoad(counts);
        return counts;
      }
    },

    /**
     * Keeps the ledger true when a day load ends without finishing (cancelled, or out of
     * retries): a day still marked running under this run id goes back to pending when it was
     * cancelled and becomes failed otherwise (an open day stays partial). The load's last attempt
     * has usually released the day itself; this covers an attempt that could not (its worker
     * lost, its heartbeat timed out), with the attempt number its start recorded.
     */
    async releaseDay(input: ReleaseDayInput): Promise<boolean> {
      const target = dayLoadOf(input);
      const cancelled = input.reason === 'cancelled';
      const status = await guarded(() =>
        releaseUnfinishedDay(db, target.day, {
          cancelled,
          reason: input.reason,
          loadId: target.runId,
          ...(target.kind === 'open-day' ? { partial: true } : {}),
        }),
      );
      if (status === 'failed') countDayFailed();
      return status !== null;
    },

    /**
     * The day's last load, when it completed at or after `since` (another run loaded it while
     * this run was going): its figures, so this run need not load the day a second time.
     */
    async dayLoadedSince(input: DayLoadedSinceInput): Promise<DayResult | null> {
      return guarded(async () => {
        const found = await findDayCompletedSince(db, input.day, new Date(input.since));
        if (!found) return null;
        return { day: input.day, loadId: found.loadId ?? '', outcome: 'attached', ...found.counts };
      });
    },

    /**
     * Waits for a day load that another run started (the workflow id is taken) and returns its
     * result, or null when it ended without loading the day.
     */
    async awaitDayWorkflow(input: AwaitWorkflowInput): Promise<DayResult | null> {
      return awaitWorkflowResult<DayResult>(input.workflowId, () => input.loadId && alive(input.loadId));
    },

    async awaitEnrichWorkflow(input: AwaitWorkflowInput): Promise<EnrichCounts | null> {
      return awaitWorkflowResult<EnrichCounts>(input.workflowId, () => input.loadId && alive(input.loadId));
    },

    async listPendingThreads(input: PendingThreadsInput): Promise<string[]> {
      return guarded(() => need('listPendingThreads')(input));
    },

    /**
     * Enriches a batch of threads. The heartbeat carries the batch's counts so far, so the UI
     * shows its progress; a retried batch resumes each thread from its stored position.
     */
    async enrichThreads(input: EnrichBatchInput): Promise<EnrichCounts> {
      const ctx = Context.current();
      let last: EnrichCounts | undefined;
      const beat = progressBeat();
      const counts = await guarded(() =>
        whileBeating(
          () => {
            alive(input.loadId);
            return last;
          },
          () =>
            need('enrichThreads')({
              threadIds: input.threadIds,
              loadId: input.loadId,
              signal: ctx.cancellationSignal,
              onProgress: (counts) => {
                last = { ...counts };
                if (beat.moved(last)) ctx.heartbeat(last);
              },
            }),
          beat,
        ),
      );
      countEnrichBatch(counts);
      return counts;
    },
  };
}

/**
 * The ledger after a failed attempt of a day load: with another attempt to come the day stays
 * `running` (an open day `partial`) with the error and the next attempt's time; after the last
 * one, or an error no retry can fix, it is released (`failed`, counted in the metrics; an open day
 * stays `partial`). A cancelled attempt is left alone: the workflow releases a day it cancels, and
 * an attempt cut short (heartbeat timeout, worker shutdown) is retried. Never throws: the load's
 * own failure is what Temporal must see, and the ledger catches up at the next attempt.
 */
async function closeFailedAttempt(
  db: Warehouse['db'],
  log: Logger,
  target: DayLoad,
  a: { attempt: LoadAttempt; policy: RetryPolicy; failure: Error },
): Promise<void> {
  const end = attemptEnd(a.failure, a.attempt.number, a.policy);
  if (end.kind === 'cancelled') return;
  const open = target.kind === 'open-day';
  const failed = {
    loadId: target.runId,
    error: a.failure.message,
    code: failureCode(a.failure),
    attempt: a.attempt,
    ...(open ? { partial: true } : {}),
  };
  try {
    if (end.kind === 'retry') {
      await recordDayRetry(db, target.day, { ...failed, retryInMs: end.retryInMs });
      log.warn(
        { code: failed.code, retryInMs: end.retryInMs, maxAttempts: a.attempt.maxAttempts },
        'day load attempt failed; Temporal retries it',
      );
      return;
    }
    const status = await releaseUnfinishedDay(db, target.day, {
      cancelled: false,
      reason: failed.error,
      code: failed.code,
      attempt: a.attempt,
      loadId: target.runId,
      ...(open ? { partial: true } : {}),
    });
    if (status === 'failed') countDayFailed();
    log.error({ code: failed.code, why: end.reason, status }, 'day load failed: no further attempt');
  } catch (e) {
    log.warn({ error: errorMessage(e) }, 'could not record the failed attempt in the ledger');
  }
}

const BEAT_EVERY_MS = 5000;

/**
 * Heartbeats on a timer while `work` runs, besides the progress beats. Without `beat` (waiting
 * for a slot: alive, with nothing to report) always; with one, only while the work moved within
 * its grace window (progress-beat.ts), so that a load or batch that hangs stops heartbeating and
 * Temporal retries it, while a quiet stretch of healthy work (a finalize, a Retry-After wait, the
 * shared rate budget) still counts as alive and keeps receiving cancellation.
 */
async function whileBeating<T>(
  details: () => unknown,
  work: () => Promise<T>,
  beat?: ProgressBeat,
): Promise<T> {
  const ctx = Context.current();
  // Well inside the heartbeat timeout, whatever the workflow set it to.
  const every = Math.max(200, Math.min(BEAT_EVERY_MS, (ctx.info.heartbeatTimeoutMs ?? 30_000) / 3));
  let stalled = false;
  const timer = setInterval(() => {
    if (!beat || beat.alive()) {
      stalled = false;
      ctx.heartbeat(details());
    } else if (!stalled) {
      stalled = true;
      ctx.log.warn(
        'no progress within CRS_STALL_TIMEOUT_MS: heartbeats stop, so Temporal retries this attempt',
        {
          quietMs: beat.quietMs(),
        },
      );
    }
  }, every);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

const ALIVE_EVERY_MS = 15_000;

/**
 * Records that a run (and its load of a day) is alive, at most every 15 s per run and day, in the
 * background: the ledger's `progress_at`, against which a run that reads `running` but is dead
 * (terminated, its worker gone) is told apart. A failed write only loses one sign of life.
 */
function livenessWriter(warehouse: Warehouse, log: Logger): (loadId: string, day?: string) => void {
  const last = new Map<string, number>();
  return (loadId, day) => {
    const key = day === undefined ? loadId : `${loadId}:${day}`;
    const now = Date.now();
    if (now - (last.get(key) ?? 0) < ALIVE_EVERY_MS) return;
    last.set(key, now);
    if (last.size > 10_000) last.clear();
    touchRun(warehouse.db, loadId, day).catch((err: unknown) =>
      log.debug({ err, loadId, day }, 'could not record a sign of life'),
    );
  };
}

/** The project's loader and enrichment, bound to the worker's dependencies. */
function realOps(deps: ActivityDeps): Partial<SyncOps> {
  const { warehouse, client, config, log } = deps;
  const enrich = createEnrichOps({
    db: warehouse.db,
    pool: warehouse.pool,
    api: client,
    log,
    concurrency: config.enrichConcurrency,
    schemaContract: config.schemaContract,
  });
  return {
    loadDay: (input) => loadExportDay({ warehouse, client, config, log }, input),
    listPendingThreads: enrich.listPendingThreads,
    enrichThreads: enrich.enrichThreads,
  };
}
