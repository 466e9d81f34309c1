/**
 * A clock that starts at a fixed instant and then runs at real speed. The simulator derives its
 * days, and with them its data and the fault rolls of each day's URL, from its clock: a test whose
 * assertions need a fault or a restricted thread to occur pins the clock, so it does not pass on
 * one calendar day and fail on the next. Token lifetimes and latencies still pass in real time.
 */
export function runningClock(startIso: string): () => Date {
  const start = Date.parse(startIso);
  if (Number.isNaN(start)) throw new Error(`not an instant: ${startIso}`);
  const t0 = Date.now();
  return () => new Date(start + (Date.now() - t0));
}

/** The instant the simulator-backed tests with fault assertions start their clock at. */
export const PINNED = '2026-11-22T12:00:00Z';
