/**
 * What one load loads, as one named thing. A run (a sync, a backfill, an intraday pull, an import,
 * a replay) has a run id, minted once; each of its loads has a load id, derived here from the run
 * id and what is loaded. A load is one of:
 *
 * - a closed day: one UTC day of the export, known to hold every record of the day, so rows of the
 *   day it lacks are marked deleted (daily, backfill, the intraday schedule's pull of yesterday);
 * - an open day: the UTC day still filling (an intraday pull): loaded, nothing deleted, the
 *   day's ledger row stays `partial`;
 * - a file: an import (or a replay of rejected lines), whose records may span many days;
 *   `wholeDays` names the days of which it holds every record (`import --complete-days`).
 *
 * The warehouse keeps its column names (BI users query them): `_load_id` and `sync_runs.load_id`
 * hold the run id, `load_key` the load id (docs/data-dictionary.md). Pure: workflow code bundles
 * this module (through contract/), and a target travels through Temporal's history (ids and
 * dates only).
 */

/** UTC days, both ends included. */
export interface DayRange {
  from: string;
  to: string;
}

export interface ClosedDayLoad {
  kind: 'closed-day';
  runId: string;
  day: string;
}

export interface OpenDayLoad {
  kind: 'open-day';
  runId: string;
  day: string;
}

export interface FileLoad {
  kind: 'file';
  runId: string;
  /** What the file is called in the ledger and the quarantine (a path, `stdin`, `replay`). */
  name: string;
  /** The days of which the file holds every record: rows of them it lacks are marked deleted. */
  wholeDays: DayRange | null;
}

/** A load of one export day, the unit of work of the workflows. */
export type DayLoad = ClosedDayLoad | OpenDayLoad;

export type LoadTarget = DayLoad | FileLoad;

export function closedDayLoad(runId: string, day: string): ClosedDayLoad {
  return { kind: 'closed-day', runId, day };
}

export function openDayLoad(runId: string, day: string): OpenDayLoad {
  return { kind: 'open-day', runId, day };
}

export function fileLoad(runId: string, name: string, wholeDays: DayRange | null = null): FileLoad {
  return { kind: 'file', runId, name, wholeDays };
}

/** A day load of a run: the open day's when `open`, else the closed day's. */
export function dayLoad(runId: string, day: string, open: boolean): DayLoad {
  return open ? openDayLoad(runId, day) : closedDayLoad(runId, day);
}

/**
 * The load's id: its checkpoint's key (`load_key`). A day load's is the run id and the day, so a
 * retry of the run's load of the day resumes from its checkpoint, and another run's load of the
 * same day starts afresh; a file's is its run's id (one load per run).
 */
export function loadIdOf(t: LoadTarget): string {
  return t.kind === 'file' ? t.runId : `${t.runId}:${t.day}`;
}

/**
 * The export day a day load reads, null for a file: the `sync_days` row that mirrors its
 * checkpoint, the day every one of its lines is counted on, and the day whose rollup marks wait
 * for its finalize.
 */
export function exportDayOf(t: LoadTarget): string | null {
  return t.kind === 'file' ? null : t.day;
}

/** The days of which the load holds every record (their rows it lacks are deleted), or null. */
export function wholeDaysOf(t: LoadTarget): DayRange | null {
  if (t.kind === 'closed-day') return { from: t.day, to: t.day };
  if (t.kind === 'open-day') return null;
  return t.wholeDays;
}

/** Where the lines came from, as the quarantine records it. */
export function sourceOf(t: LoadTarget): 'export' | 'file' {
  return t.kind === 'file' ? 'file' : 'export';
}

/** The source's name, as the quarantine records it. */
export function sourceNameOf(t: LoadTarget): string {
  return t.kind === 'file' ? t.name : `export:${t.day}`;
}

/** Whether a value read from a history or a request is a day load (the shape, not the dates). */
export function isDayLoad(x: unknown): x is DayLoad {
  if (typeof x !== 'object' || x === null) return false;
  const t = x as Record<string, unknown>;
  return (
    (t.kind === 'closed-day' || t.kind === 'open-day') &&
    typeof t.runId === 'string' &&
    typeof t.day === 'string'
  );
}

/**
 * The shape a day load had in histories recorded before load targets: the day, the run's id
 * (then called its load id) and `partial` for an open day.
 */
export interface RecordedDayLoad {
  day: string;
  loadId: string;
  partial?: boolean;
}

/** A day load from either shape: a target, or the fields of a history recorded before them. */
export function dayLoadOf(input: { target?: DayLoad } | RecordedDayLoad): DayLoad {
  if ('target' in input && isDayLoad(input.target)) return input.target;
  const old = input as Partial<RecordedDayLoad>;
  if (typeof old.day !== 'string' || typeof old.loadId !== 'string') {
    throw new TypeError(`not a day load: ${JSON.stringify(input).slice(0, 200)}`);
  }
  return dayLoad(old.loadId, old.day, old.partial === true);
}
