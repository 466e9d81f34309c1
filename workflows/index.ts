/** The workflows the crs-sync worker registers (this file is the bundler's entry point). */
export { backfill } from './backfill.ts';
export { enrichPending } from './enrich-pending.ts';
export { syncDay } from './sync-day.ts';
export { syncIntraday } from './sync-intraday.ts';
export { syncWindow } from './sync-window.ts';
