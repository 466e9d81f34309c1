/**
 * Decides when a long activity (a day load, an enrichment batch) heartbeats. A heartbeat says
 * "this attempt is getting somewhere": it is sent when the progress details change, and between
 * changes on a timer only while the last change is recent (within `stallMs`). Work that stops
 * moving (a query hung on a dead connection, a stream that never ends) then stops heartbeating,
 * misses its heartbeat timeout, and Temporal fails the attempt and retries it, where a plain
 * timer would keep it looking alive for hours. The grace window covers the quiet stretches of
 * healthy work: a day's finalize, a Retry-After wait, a resumed load checking skipped lines.
 */
export interface ProgressBeat {
  /** Records the latest details; true when they differ from the previous ones (a beat is due). */
  moved(details: unknown): boolean;
  /** Whether a keep-alive beat may be sent now: the work moved within the grace window. */
  alive(): boolean;
  /** Milliseconds since the work last moved. */
  quietMs(): number;
}

export function createProgressBeat(opts: { stallMs: number; now?: () => number }): ProgressBeat {
  const now = opts.now ?? Date.now;
  let last: string | undefined;
  let movedAt = now();
  return {
    moved(details) {
      const key = JSON.stringify(details);
      if (key === last) return false;
      last = key;
      movedAt = now();
      return true;
    },
    alive() {
      return now() - movedAt < opts.stallMs;
    },
    quietMs() {
      return now() - movedAt;
    },
  };
}
