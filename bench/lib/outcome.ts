/** One contestant's measured load, as the comparison table shows it. */
export interface Outcome {
  name: string;
  rows: number;
  bytes: number;
  /** Seconds of the load itself (start-up excluded where the contestant reports it). */
  seconds: number;
  /** Seconds of the whole child process, start-up included. */
  wallS: number;
  peakRssMb: number | null;
  /** CPU seconds of the contestant's own process(es). */
  cpuS: number | null;
  /** CPU seconds of the local PostgreSQL server meanwhile. */
  pgCpuS: number | null;
  notes: string[];
}

/** A contestant that could not run: why, so the table can say so and the run goes on. */
export interface Skipped {
  name: string;
  reason: string;
}

export type ContestResult = Outcome | Skipped;

export function isOutcome(r: ContestResult): r is Outcome {
  return (r as Outcome).seconds !== undefined;
}

export function rowsPerS(o: Outcome): number {
  return o.rows / o.seconds;
}
