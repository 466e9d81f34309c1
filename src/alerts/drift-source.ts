import { openSchemaDrift, queryable } from '../warehouse/read/index.ts';
import type { Executor } from '../warehouse/types.ts';

/** A drift from the export's or the thread API's known contract, not yet accepted. */
export interface OpenDrift {
  source: string;
  path: string;
  kind: string;
  firstDay: string | null;
  count: number;
  /** Truncated and masked when it was recorded (src/common/schema-drift.ts). */
  example: string | null;
}

/**
 * The schema drifts the `schema_drift` check reports: every drift not accepted yet. An incident
 * stays open until `crs-sync schema accept` widens the contract by that field.
 */
export async function openSchemaDrifts(db: Executor): Promise<OpenDrift[]> {
  return (await openSchemaDrift(queryable(db))).map((d) => ({
    source: d.source,
    path: d.path,
    kind: d.kind,
    firstDay: d.firstDay,
    count: d.count,
    example: d.example,
  }));
}
