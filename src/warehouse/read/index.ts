/**
 * The read model: every query that reads the warehouse for people (the dashboard's pages,
 * `crs-sync status`, `rollups status`, the demo's summary; `deletes list` and `rejects list` read
 * through held-deletes.ts and quarantine.ts, which share their predicates with the writes), as
 * plain functions over a `Queryable`, returning typed rows. Ranged figures take a `Source`, chosen
 * once per snapshot by `readSource`. See src/warehouse/README.md.
 */
export type { HeldDay } from '../held-deletes.ts';
export { listHeldDeletes } from '../held-deletes.ts';
export type { RejectFilter } from '../quarantine.ts';
export { listRejects } from '../quarantine.ts';
export * from './alerts.ts';
export * from './citations.ts';
export * from './demo-figures.ts';
export { type DataExtent, dataExtent, dataSpan } from './extent.ts';
export * from './freshness.ts';
export * from './health.ts';
export * from './query-sets.ts';
export * from './queryable.ts';
export * from './rollup-status.ts';
export * from './runs.ts';
export * from './schema-drift.ts';
export * from './snapshot.ts';
export * from './source.ts';
export * from './status.ts';
export * from './thread-list.ts';
export * from './threads.ts';
export * from './usage.ts';
export * from './users.ts';
