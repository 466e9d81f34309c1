import { continueAsNew, defineQuery, setCurrentDetails, setHandler } from '@temporalio/workflow';
import { addEnrich, type EnrichCounts, emptyEnrichCounts } from '../contract/counts.ts';
import { runIdOf } from '../contract/run-id.ts';
import type { EnrichInput } from '../contract/workflows.ts';
import { chunk, runBounded } from './bounded.ts';
import { enrichment, ledger } from './policies.ts';

export const enrichProgressQuery = defineQuery<EnrichCounts>('enrichProgress');

/**
 * Enriches every pending thread: pages through pending thread ids in id order (a thread that
 * fails stays behind the cursor, so the stream always ends) and fans each page out into batches,
 * a bounded number at a time. Continues as new every few pages to keep its history short.
 */
export async function enrichPending(input: EnrichInput): Promise<EnrichCounts> {
  // A stream started (or continued as new) by an earlier release carries its run id as `loadId`.
  const runId = runIdOf(input);
  const batchSize = input.batchSize ?? 25;
  const concurrency = input.concurrency ?? (await ledger.workerSettings()).enrichConcurrency;
  const pagesPerRun = input.pagesPerRun ?? 20;
  const state = input.state ?? { afterThreadId: null, totals: emptyEnrichCounts(), runs: 0 };
  state.runs += 1;
  setHandler(enrichProgressQuery, () => state.totals);
  for (let page = 0; page < pagesPerRun; page++) {
    const ids = await ledger.listPendingThreads({
      afterThreadId: state.afterThreadId,
      limit: batchSize * concurrency,
    });
    if (ids.length === 0) return state.totals;
    await runBounded(chunk(ids, batchSize), concurrency, async (threadIds) => {
      const c = await enrichment.enrichThreads({ threadIds, runId });
      state.totals = addEnrich(state.totals, c);
      setCurrentDetails(`enriched ${state.totals.done} of ${state.totals.threads} threads`);
    });
    state.afterThreadId = ids[ids.length - 1] ?? state.afterThreadId;
  }
  return await continueAsNew<typeof enrichPending>({ ...input, concurrency, state });
}
