/**
 * A run's id as the payloads carry it. A run (a sync, a backfill, an intraday pull) mints its id
 * once and every day and enrichment batch of it shares it; the warehouse keeps it in `load_id` and
 * `_load_id` (src/common/load-target.ts). It is not Temporal's run id of an execution.
 *
 * Payloads written before the name `runId` carry the same id as `loadId`: the recorded histories,
 * and the workflows and activity tasks in flight when a worker is upgraded. A payload this
 * release reads may be either, so an input that holds a run id is a `RunRef` and is read with
 * `runIdOf`; this release writes `runId` only. Pure: workflow code bundles this module.
 */
export type RunRef = { runId: string } | RecordedRunRef;

/** The run id under its recorded name (the same value; never the id of one load). */
export interface RecordedRunRef {
  loadId: string;
}

/** The run id of a payload of either shape; a payload with neither is not one (TypeError). */
export function runIdOf(x: RunRef): string {
  const id = optionalRunIdOf(x);
  if (id === undefined) throw new TypeError(`no run id in ${JSON.stringify(x).slice(0, 200)}`);
  return id;
}

/** The run id of a payload where it is optional (absent: undefined). */
export function optionalRunIdOf(x: Partial<{ runId: string; loadId: string }>): string | undefined {
  if (typeof x.runId === 'string') return x.runId;
  if (typeof x.loadId === 'string') return x.loadId;
  return undefined;
}
