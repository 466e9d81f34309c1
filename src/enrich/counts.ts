/**
 * What an enrichment batch did, summed up to the enrichment stream's and the run's totals. The
 * field names travel through Temporal histories (contract/counts.ts re-exports this type), so
 * they stay as they are. Pure: workflow code imports this module.
 */
export interface EnrichCounts {
  threads: number;
  done: number;
  deleted: number;
  forbidden: number;
  failed: number;
  messages: number;
  artifacts: number;
}

export function emptyEnrichCounts(): EnrichCounts {
  return { threads: 0, done: 0, deleted: 0, forbidden: 0, failed: 0, messages: 0, artifacts: 0 };
}

/** The sum of two counts, as a new object (the old one may have been published). */
export function addEnrich(a: EnrichCounts, b: EnrichCounts): EnrichCounts {
  const out = { ...a };
  for (const k of Object.keys(out) as (keyof EnrichCounts)[]) out[k] += b[k];
  return out;
}
