import { defineQuery } from '@temporalio/workflow';
import type { DayProgress, SyncProgress } from '../contract/workflows.ts';

/** Progress of syncWindow and backfill runs (the CLI's progress bar reads it). */
export const progressQuery = defineQuery<SyncProgress>('progress');
/** Progress of one day's load. */
export const dayProgressQuery = defineQuery<DayProgress>('dayProgress');
