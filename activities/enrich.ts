import { Context } from '@temporalio/activity';
import type { Activities, EnrichBatchInput } from '../contract/activities.ts';
import type { EnrichCounts } from '../contract/counts.ts';
import { runIdOf } from '../contract/run-id.ts';
import type { ServiceClient } from '../src/api/index.ts';
import type { Config } from '../src/config.ts';
import { createEnrichOps, type EnrichOps } from '../src/enrich/index.ts';
import type { Logger } from '../src/log.ts';
import { countEnrichBatch } from '../src/metrics/pipeline.ts';
import type { Warehouse } from '../src/warehouse/db.ts';
import { guarded } from './failures.ts';
import { createHeartbeat } from './keep-alive.ts';
import type { Liveness } from './liveness.ts';

export interface EnrichActivityDeps {
  warehouse: Warehouse;
  /** The service client the enrichment reads the thread API with. */
  client: ServiceClient;
  config: Config;
  log: Logger;
  alive: Liveness;
}

/** The enrichment: the pending threads and a batch of them enriched, through src/enrich. */
export function createEnrichActivities(
  deps: EnrichActivityDeps,
): Pick<Activities, 'listPendingThreads' | 'enrichThreads'> {
  const { warehouse, client, config, log } = deps;
  // One per worker: its page writer groups the pages of concurrent batches into shared statements.
  const enrich = createEnrichOps({
    db: warehouse.db,
    pool: warehouse.pool,
    api: client,
    log,
    concurrency: config.enrichConcurrency,
    schemaContract: config.schemaContract,
  });
  return {
    listPendingThreads: (input) => guarded(() => enrich.listPendingThreads(input)),
    enrichThreads: (input) => enrichBatch(enrich, deps, input),
  };
}

/**
 * Enriches a batch of threads. The heartbeat carries the batch's counts so far, so the UI shows
 * its progress; a retried batch resumes each thread from its stored position.
 */
async function enrichBatch(
  enrich: EnrichOps,
  deps: Pick<EnrichActivityDeps, 'config' | 'alive'>,
  input: EnrichBatchInput,
): Promise<EnrichCounts> {
  const ctx = Context.current();
  // The enrichment's rows name the run that enriched them (`load_id`).
  const runId = runIdOf(input);
  const heartbeat = createHeartbeat(deps.config.stallTimeoutMs);
  const counts = await guarded(() =>
    heartbeat.around(
      () =>
        enrich.enrichThreads({
          threadIds: input.threadIds,
          loadId: runId,
          signal: ctx.cancellationSignal,
          onProgress: (c) => heartbeat.progress({ ...c }),
        }),
      () => deps.alive(runId),
    ),
  );
  countEnrichBatch(counts);
  return counts;
}
