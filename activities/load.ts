import { Context } from '@temporalio/activity';
import type { RetryPolicy } from '@temporalio/common';
import type { Activities, DayLoadInput } from '../contract/activities.ts';
import { type LoadCounts, pickCounts } from '../contract/counts.ts';
import { type DayLoad, dayLoadOf } from '../contract/load-target.ts';
import type { ServiceClient } from '../src/api/index.ts';
import type { Config } from '../src/config.ts';
import { errorMessage } from '../src/errors.ts';
import { loadExportDay } from '../src/ingest/source/export-day.ts';
import type { Logger } from '../src/log.ts';
import { countDayFailed, countDayLoad } from '../src/metrics/pipeline.ts';
import type { Warehouse } from '../src/warehouse/db.ts';
import { type LoadAttempt, recordDayRetry, releaseUnfinishedDay } from '../src/warehouse/ledger.ts';
import { attemptEnd, failureCode, loadRetryPolicy, maxAttemptsOf } from './attempts.ts';
import { guarded, toFailure } from './failures.ts';
import { createHeartbeat, whileBeating } from './keep-alive.ts';
import type { Liveness } from './liveness.ts';
import type { Semaphore } from './semaphore.ts';

/** What a day load heartbeats: its committed checkpoint, which a retried attempt starts from. */
export interface DayLoadProgress {
  linesCommitted: number;
  rowsRead: number;
  bytesRead: number;
}

export interface LoadActivityDeps {
  warehouse: Warehouse;
  /** The service client the loader downloads the export with. */
  client: ServiceClient;
  config: Config;
  log: Logger;
  /** The worker's day-load slots: a load beyond them waits here, heartbeating. */
  slots: Semaphore;
  alive: Liveness;
}

/** The day load: one day of the export through src/ingest/export-day.ts. */
export function createLoadActivities(deps: LoadActivityDeps): Pick<Activities, 'loadExportDay'> {
  const load = new DayLoadActivity(deps);
  return { loadExportDay: (input) => load.run(input) };
}

/** One attempt of a day load, as Temporal runs it. */
interface Attempt {
  target: DayLoad;
  ctx: Context;
  log: Logger;
  /** The checkpoint the previous attempt heartbeated last. */
  resumedFrom: DayLoadProgress | undefined;
  number: LoadAttempt;
  policy: RetryPolicy;
}

class DayLoadActivity {
  readonly #deps: LoadActivityDeps;

  constructor(deps: LoadActivityDeps) {
    this.#deps = deps;
  }

  /**
   * Loads one day of the export. The loader commits data and its checkpoint together and, run
   * again with the same run id, resumes from the stored checkpoint; the heartbeat carries the
   * same checkpoint so the UI shows progress and a stalled worker is detected.
   */
  async run(input: DayLoadInput): Promise<LoadCounts> {
    const a = this.#attempt(dayLoadOf(input));
    const { target, ctx, resumedFrom } = a;
    if (resumedFrom) a.log.info({ resumedFrom }, 'resuming the day load from its checkpoint');
    return guarded(async () => {
      // Waiting for a slot heartbeats too, so a long wait is not taken for a dead worker.
      const release = await whileBeating(
        () => {
          this.#deps.alive(target.runId);
          return resumedFrom;
        },
        () => this.#deps.slots.acquire(ctx.cancellationSignal),
      );
      try {
        return await this.#loadOnce(a);
      } catch (err) {
        const failure = toFailure(err);
        await this.#closeFailedAttempt(a, failure);
        throw failure;
      } finally {
        release();
      }
    });
  }

  #attempt(target: DayLoad): Attempt {
    const ctx = Context.current();
    // Temporal's attempt number is the day's one count of attempts: the ledger, status, the
    // alert and the metrics all take it from here.
    const policy = loadRetryPolicy(ctx.info.retryPolicy);
    return {
      target,
      ctx,
      log: this.#deps.log.child({ day: target.day, runId: target.runId, attempt: ctx.info.attempt }),
      resumedFrom: ctx.info.heartbeatDetails as DayLoadProgress | undefined,
      number: { number: ctx.info.attempt, maxAttempts: maxAttemptsOf(policy) },
      policy,
    };
  }

  async #loadOnce(a: Attempt): Promise<LoadCounts> {
    const { warehouse, client, config, log, alive } = this.#deps;
    const { target, ctx } = a;
    const heartbeat = createHeartbeat(config.stallTimeoutMs, a.resumedFrom);
    const summary = await heartbeat.around(
      () =>
        loadExportDay(
          { warehouse, client, config, log },
          {
            target,
            attempt: a.number,
            signal: ctx.cancellationSignal,
            onProgress: (p) => {
              const details: DayLoadProgress = {
                linesCommitted: p.linesCommitted,
                rowsRead: p.rowsRead,
                bytesRead: p.bytesRead,
              };
              heartbeat.progress(details);
              alive(target.runId, target.day);
            },
          },
        ),
      () => alive(target.runId, target.day),
    );
    // Only the counts go into the workflow's history (not the loader's diagnostics).
    const counts = pickCounts(summary);
    countDayLoad(counts);
    return counts;
  }

  /**
   * The ledger after a failed attempt: with another attempt to come the day stays `running` (an
   * open day `partial`) with the error and the next attempt's time; after the last one, or an
   * error no retry can fix, it is released (`failed`, counted in the metrics; an open day stays
   * `partial`). A cancelled attempt is left alone: the workflow releases a day it cancels, and an
   * attempt cut short (heartbeat timeout, worker shutdown) is retried. Never throws: the load's
   * own failure is what Temporal must see, and the ledger catches up at the next attempt.
   */
  async #closeFailedAttempt(a: Attempt, failure: Error): Promise<void> {
    const end = attemptEnd(failure, a.number.number, a.policy);
    if (end.kind === 'cancelled') return;
    const failed = {
      runId: a.target.runId,
      error: failure.message,
      code: failureCode(failure),
      attempt: a.number,
      ...(a.target.kind === 'open-day' ? { partial: true } : {}),
    };
    const db = this.#deps.warehouse.db;
    try {
      if (end.kind === 'retry') {
        await recordDayRetry(db, a.target.day, { ...failed, retryInMs: end.retryInMs });
        a.log.warn(
          { code: failed.code, retryInMs: end.retryInMs, maxAttempts: a.number.maxAttempts },
          'day load attempt failed; Temporal retries it',
        );
        return;
      }
      const status = await releaseUnfinishedDay(db, a.target.day, {
        cancelled: false,
        reason: failed.error,
        code: failed.code,
        attempt: failed.attempt,
        runId: failed.runId,
        ...(failed.partial ? { partial: true } : {}),
      });
      if (status === 'failed') countDayFailed();
      a.log.error({ code: failed.code, why: end.reason, status }, 'day load failed: no further attempt');
    } catch (e) {
      a.log.warn({ error: errorMessage(e) }, 'could not record the failed attempt in the ledger');
    }
  }
}
