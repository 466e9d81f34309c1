import type { DriftKind, DriftSource } from '../../common/schema-drift.ts';
import { type Queryable, rowsOf } from './queryable.ts';

/** One drift as people see it (`crs-sync schema changes`, status, the dashboard, the alerts). */
export interface SchemaDrift {
  source: DriftSource;
  path: string;
  kind: DriftKind;
  expectedType: string | null;
  actualType: string | null;
  /** Truncated and masked when it was recorded. */
  example: string | null;
  /** The first UTC day a record carrying it was of (export), or it was seen on (thread API). */
  firstDay: string | null;
  firstSeenAt: Date;
  lastSeenAt: Date;
  /** Records or entities that carried it (a second load of the same day does not add to it). */
  count: number;
  acceptedAt: Date | null;
}

interface DriftRow {
  source: DriftSource;
  path: string;
  kind: DriftKind;
  expected_type: string | null;
  actual_type: string | null;
  example: string | null;
  first_day: string | null;
  first_seen_at: Date;
  last_seen_at: Date;
  accepted_at: Date | null;
  count: string;
}

// The view `schema_changes` (migration 2026-11-28T21-00-00) counts each drift: Σ over scope of
// (max over load key of Σ over partition), so a retried batch or a day loaded again does not add
// to it. Its example value is in the internal schema, which a reader role cannot read: such a
// role gets the drift without it.
const DRIFT_SQL = (where: string, example: boolean) => `
  select d.source, d.path, d.kind, d.expected_type, d.actual_type,
    ${
      example
        ? '(select x.example from schema_drift x where (x.source, x.path, x.kind) = (d.source, d.path, d.kind))'
        : 'null::text'
    } as example,
    d.first_day::text as first_day, d.first_seen_at, d.last_seen_at, d.accepted_at, d.count::text as count
  from schema_changes d
  where ${where}
  order by d.first_seen_at, d.source, d.path, d.kind`;

async function selectDrift(q: Queryable, where: string, values: unknown[]): Promise<SchemaDrift[]> {
  const [seen] = await rowsOf<{ examples: boolean }>(
    q,
    `select coalesce(has_table_privilege(to_regclass('schema_drift'), 'select'), false) as examples`,
  );
  const rows = await rowsOf<DriftRow>(q, DRIFT_SQL(where, seen?.examples === true), values);
  return rows.map((x) => ({
    source: x.source,
    path: x.path,
    kind: x.kind,
    expectedType: x.expected_type,
    actualType: x.actual_type,
    example: x.example,
    firstDay: x.first_day,
    firstSeenAt: x.first_seen_at,
    lastSeenAt: x.last_seen_at,
    count: Number(x.count),
    acceptedAt: x.accepted_at,
  }));
}

/** Every drift recorded, accepted ones included (`acceptedAt`) unless told otherwise, oldest first. */
export function listSchemaDrift(
  q: Queryable,
  opts: { source?: DriftSource; includeAccepted?: boolean } = {},
): Promise<SchemaDrift[]> {
  return selectDrift(q, `($1::text is null or d.source = $1) and ($2::boolean or d.accepted_at is null)`, [
    opts.source ?? null,
    opts.includeAccepted !== false,
  ]);
}

/** Drift not accepted yet: what status, the dashboard's health page and the `schema_drift` alert show. */
export function openSchemaDrift(q: Queryable): Promise<SchemaDrift[]> {
  return listSchemaDrift(q, { includeAccepted: false });
}

/** Open (not accepted) drift last seen at or after `since`. */
export function openSchemaDriftSince(q: Queryable, since: Date): Promise<SchemaDrift[]> {
  return selectDrift(q, 'd.accepted_at is null and d.last_seen_at >= $1', [since]);
}
