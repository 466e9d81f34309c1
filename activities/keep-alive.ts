import { Context } from '@temporalio/activity';
import { createProgressBeat, type ProgressBeat } from './progress-beat.ts';

const BEAT_EVERY_MS = 5000;

/**
 * The heartbeats of one attempt of a long activity (a day load, an enrichment batch): a beat for
 * each change of its progress details, and between changes, on a timer, the last details again
 * while the work moved within the stall window (progress-beat.ts). Built inside the activity
 * (it heartbeats through the activity's context).
 */
export interface Heartbeat {
  /** The work's progress: heartbeated at once when it differs from the last. */
  progress(details: unknown): void;
  /** Runs `work` with the keep-alive timer; `onTick` runs with every tick, beating or not. */
  around<T>(work: () => Promise<T>, onTick?: () => void): Promise<T>;
}

/** `from`: the details the attempt starts from (a retried load's checkpoint), not beaten again. */
export function createHeartbeat(stallMs: number, from?: unknown): Heartbeat {
  return new ProgressHeartbeat(Context.current(), stallMs, from);
}

class ProgressHeartbeat implements Heartbeat {
  readonly #ctx: Context;
  readonly #beat: ProgressBeat;
  #last: unknown;

  constructor(ctx: Context, stallMs: number, from: unknown) {
    this.#ctx = ctx;
    this.#beat = createProgressBeat({ stallMs });
    this.#beat.moved(from);
    this.#last = from;
  }

  progress(details: unknown): void {
    this.#last = details;
    if (this.#beat.moved(details)) this.#ctx.heartbeat(details);
  }

  around<T>(work: () => Promise<T>, onTick?: () => void): Promise<T> {
    return whileBeating(
      () => {
        onTick?.();
        return this.#last;
      },
      work,
      this.#beat,
    );
  }
}

/**
 * Heartbeats on a timer while `work` runs, besides the progress beats. Without `beat` (waiting
 * for a slot: alive, with nothing to report) always; with one, only while the work moved within
 * its grace window (progress-beat.ts), so that a load or batch that hangs stops heartbeating and
 * Temporal retries it, while a quiet stretch of healthy work (a finalize, a Retry-After wait, the
 * shared rate budget) still counts as alive and keeps receiving cancellation.
 */
export async function whileBeating<T>(
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
        { quietMs: beat.quietMs() },
      );
    }
  }, every);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
