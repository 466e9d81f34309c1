import { citationTypesDaily, citationTypeTotals, topCitationSources } from './citations.ts';
import { dataExtent } from './extent.ts';
import {
  enrichmentBacklog,
  failedDays,
  heldDeletes,
  ledgerDays,
  quarantine,
  retryingDays,
  syncHealth,
} from './health.ts';
import type { DayRange, Queryable } from './queryable.ts';
import { recentRuns } from './runs.ts';
import type { Source } from './source.ts';
import { threadBreakdown, topThreads } from './threads.ts';
import { usageDaily, usageTotals } from './usage.ts';
import { newUsersDaily, topUsers } from './users.ts';

type Query = (q: Queryable, r: DayRange) => Promise<unknown>;

/** The queries of the current state, the same whatever the source (the ledger's small tables). */
const STATE_QUERIES: Record<string, Query> = {
  syncHealth: (q) => syncHealth(q),
  ledgerDays,
  failedDays: (q) => failedDays(q),
  retryingDays: (q) => retryingDays(q),
  heldDeletes: (q) => heldDeletes(q),
  quarantine: (q) => quarantine(q),
  enrichmentBacklog: (q) => enrichmentBacklog(q),
  recentRuns: (q) => recentRuns(q),
};

/** The names of the state queries: what a load changes in the ledger, not what the rollups hold. */
export const STATE_QUERY_NAMES: readonly string[] = Object.freeze(Object.keys(STATE_QUERIES));

function ranged(source: Source): Record<string, Query> {
  return {
    dataExtent: (q) => dataExtent(q, source),
    usageDaily: (q, r) => usageDaily(q, r, source),
    usageTotals: (q, r) => usageTotals(q, r, source),
    topUsers: (q, r) => topUsers(q, r, source),
    newUsersDaily: (q, r) => newUsersDaily(q, r, source),
    threadBreakdown: (q, r) => threadBreakdown(q, r, source),
    topThreads: (q, r) => topThreads(q, r, source),
    citationTypesDaily: (q, r) => citationTypesDaily(q, r, source),
    citationTypeTotals: (q, r) => citationTypeTotals(q, r, source),
    topCitationSources: (q, r) => topCitationSources(q, r, source),
  };
}

/**
 * Every query of the dashboard by name, as its pages run them for a range (those of the current
 * state ignore it), with the source fixed rather than chosen (`readSource`): what the BI bench
 * times one by one and a test compares. `DASHBOARD_QUERIES` reads the rollups,
 * `RAW_DASHBOARD_QUERIES` the same names over the raw tables, `MIXED_DASHBOARD_QUERIES` the rollups
 * for the current days and the raw rows of the marked ones (same rows).
 */
export const DASHBOARD_QUERIES: Readonly<Record<string, Query>> = Object.freeze({
  ...ranged('rollup'),
  ...STATE_QUERIES,
});
export const RAW_DASHBOARD_QUERIES: Readonly<Record<string, Query>> = Object.freeze({
  ...ranged('raw'),
  ...STATE_QUERIES,
});
export const MIXED_DASHBOARD_QUERIES: Readonly<Record<string, Query>> = Object.freeze({
  ...ranged('mixed'),
  ...STATE_QUERIES,
});
