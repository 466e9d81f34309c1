import { CompiledQuery } from 'kysely';
import type { Executor } from '../types.ts';

/**
 * What the read model's queries run on: anything with pg's `query(text, values)` whose
 * search_path is the warehouse schema (a pool, a pooled client inside the dashboard's read-only
 * transaction, a bare client), or a kysely `Executor` through `queryable`. Plain SQL text rather
 * than kysely's builder, because the dashboard runs every query of a page on one held client, in
 * one snapshot, where a kysely instance has no place.
 */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** UTC calendar days, both included, as 'YYYY-MM-DD'. */
export interface DayRange {
  from: string;
  to: string;
}

/** How many rows a "top N" table shows. */
export const TOP_N = 25;

export async function rowsOf<T>(q: Queryable, text: string, values: unknown[] = []): Promise<T[]> {
  return (await q.query(text, values)).rows as T[];
}

/** A kysely `Executor` (a transaction included) as a `Queryable`: the same connection, the same snapshot. */
export function queryable(db: Executor): Queryable {
  return {
    query: async (text, values = []) => {
      const r = await db.executeQuery(CompiledQuery.raw(text, values));
      return { rows: r.rows as unknown[] };
    },
  };
}
