import type {
  Activities,
  BeginRunInput,
  DayLoadedSinceInput,
  EndRunInput,
  PlanInput,
  PlanResult,
  ReleaseDayInput,
  RetentionSweep,
  WorkerSettings,
} from '../contract/activities.ts';
import { dayLoadOf } from '../contract/load-target.ts';
import { runIdOf } from '../contract/run-id.ts';
import type { DayResult } from '../contract/workflows.ts';
import type { Config } from '../src/config.ts';
import { errorMessage } from '../src/errors.ts';
import type { Logger } from '../src/log.ts';
import { countDayFailed } from '../src/metrics/pipeline.ts';
import type { Warehouse } from '../src/warehouse/db.ts';
import { closeRun, findDayCompletedSince, releaseUnfinishedDay, startRun } from '../src/warehouse/ledger.ts';
import { applyRetention } from '../src/warehouse/privacy/retention.ts';
import { planWindow } from '../src/warehouse/sync-window.ts';
import { guarded } from './failures.ts';

export interface LedgerActivityDeps {
  db: Warehouse['db'];
  /** The sweep's refresh of the rollups runs on the pool (src/warehouse/rollups). */
  pool: Warehouse['pool'];
  config: Pick<Config, 'lookbackDays' | 'enrichConcurrency' | 'textRetentionDays'>;
  log: Logger;
}

/** The activities that keep a run's and its days' bookkeeping, and tell the workflows the worker's settings. */
export type LedgerActivities = Pick<
  Activities,
  | 'planSyncWindow'
  | 'workerSettings'
  | 'beginRun'
  | 'endRun'
  | 'releaseDay'
  | 'dayLoadedSince'
  | 'sweepRetainedText'
>;

/** The ledger's activities: quick statements through src/warehouse/ledger.ts and the window planner. */
export function createLedgerActivities(deps: LedgerActivityDeps): LedgerActivities {
  const l = new RunLedger(deps);
  return {
    planSyncWindow: (input) => l.planSyncWindow(input),
    workerSettings: () => l.workerSettings(),
    beginRun: (input) => l.beginRun(input),
    endRun: (input) => l.endRun(input),
    releaseDay: (input) => l.releaseDay(input),
    dayLoadedSince: (input) => l.dayLoadedSince(input),
    sweepRetainedText: () => l.sweepRetainedText(),
  };
}

class RunLedger {
  readonly #db: Warehouse['db'];
  readonly #pool: Warehouse['pool'];
  readonly #config: LedgerActivityDeps['config'];
  readonly #log: Logger;

  constructor(deps: LedgerActivityDeps) {
    this.#db = deps.db;
    this.#pool = deps.pool;
    this.#config = deps.config;
    this.#log = deps.log;
  }

  async planSyncWindow(input: PlanInput): Promise<PlanResult> {
    return guarded(async () => {
      const plan = await planWindow(this.#db, {
        lookbackDays: this.#config.lookbackDays,
        now: new Date(input.now),
        ...(input.from ? { from: input.from } : {}),
        ...(input.to ? { to: input.to } : {}),
      });
      return { ...plan, enrichConcurrency: this.#config.enrichConcurrency };
    });
  }

  /** Text past CRS_TEXT_RETENTION_DAYS cleared (src/warehouse/privacy/retention.ts); logged either way. */
  async sweepRetainedText(): Promise<RetentionSweep> {
    const days = this.#config.textRetentionDays;
    if (days === undefined) return { retentionDays: null, before: null, rows: {} };
    try {
      const r = await guarded(() => applyRetention(this.#pool, days));
      this.#log.info({ retentionDays: days, before: r.before, rows: r.rows }, 'text past retention cleared');
      return { retentionDays: days, before: r.before, rows: r.rows };
    } catch (err) {
      this.#log.error(
        { retentionDays: days, error: errorMessage(err) },
        'the retention sweep failed; the next daily run sweeps again',
      );
      throw err;
    }
  }

  async workerSettings(): Promise<WorkerSettings> {
    return { enrichConcurrency: this.#config.enrichConcurrency };
  }

  async beginRun(input: BeginRunInput): Promise<void> {
    const runId = runIdOf(input);
    const { abandoned } = await guarded(() =>
      startRun(this.#db, {
        runId,
        kind: input.kind,
        windowStart: input.from,
        windowEnd: input.to,
        workflowId: input.workflowId,
      }),
    );
    if (abandoned.length > 0)
      this.#log.warn({ runId, abandoned }, 'runs with no sign of life marked abandoned');
  }

  async endRun(input: EndRunInput): Promise<void> {
    await guarded(() => closeRun(this.#db, runIdOf(input), input.status, input.totals, input.error));
  }

  /**
   * Keeps the ledger true when a day load ends without finishing (cancelled, or out of
   * retries): a day still marked running under this run id goes back to pending when it was
   * cancelled and becomes failed otherwise (an open day stays partial). The load's last attempt
   * has usually released the day itself; this covers an attempt that could not (its worker
   * lost, its heartbeat timed out), with the attempt number its start recorded.
   */
  async releaseDay(input: ReleaseDayInput): Promise<boolean> {
    const target = dayLoadOf(input);
    const status = await guarded(() =>
      releaseUnfinishedDay(this.#db, target.day, {
        cancelled: input.reason === 'cancelled',
        reason: input.reason,
        runId: target.runId,
        ...(target.kind === 'open-day' ? { partial: true } : {}),
      }),
    );
    if (status === 'failed') countDayFailed();
    return status !== null;
  }

  /**
   * The day's last load, when it completed at or after `since` (another run loaded it while
   * this run was going): its figures, so this run need not load the day a second time.
   */
  async dayLoadedSince(input: DayLoadedSinceInput): Promise<DayResult | null> {
    return guarded(async () => {
      const found = await findDayCompletedSince(this.#db, input.day, new Date(input.since));
      if (!found) return null;
      return { day: input.day, runId: found.runId ?? '', outcome: 'attached', ...found.counts };
    });
  }
}
