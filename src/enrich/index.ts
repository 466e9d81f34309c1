/**
 * Thread enrichment: what the Temporal activities `listPendingThreads` and
 * `enrichThreads` run (activities/enrich.ts).
 *
 *   const ops = createEnrichOps({ db, pool, api, log, concurrency: config.enrichConcurrency,
 *     schemaContract: config.schemaContract });
 *   await ops.listPendingThreads({ afterThreadId, limit }): Promise<string[]>
 *   await ops.enrichThreads({ threadIds, loadId, signal, onProgress }): Promise<EnrichCounts>
 *     onProgress (optional) fires after every stored page and finished thread: heartbeat there.
 */
import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { ServiceClient } from '../api/index.ts';
import type { Logger } from '../log.ts';
import { isRetryableDbError, toDbCrsError } from '../warehouse/db-errors.ts';
import { listPendingThreads } from '../warehouse/enrichment.ts';
import { refreshRollups } from '../warehouse/rollups/refresh.ts';
import type { Database } from '../warehouse/types.ts';
import type { EnrichCounts } from './counts.ts';
import { type EnrichThreadsInput, enrichThreads } from './enrich-threads.ts';
import { createPageWriter } from './page-group-commit.ts';
import { createThreadNames } from './thread-names.ts';

export { listPendingThreads } from '../warehouse/enrichment.ts';
export { DEFAULT_MAX_THREAD_ATTEMPTS, type EnrichThreadsInput, enrichThreads } from './enrich-threads.ts';

export interface EnrichOps {
  listPendingThreads(input: { afterThreadId: string | null; limit: number }): Promise<string[]>;
  enrichThreads(input: EnrichThreadsInput): Promise<EnrichCounts>;
}

export function createEnrichOps(o: {
  db: Kysely<Database>;
  /** The pool behind `db` (Warehouse.pool). */
  pool: pg.Pool;
  api: ServiceClient;
  log: Logger;
  concurrency: number;
  pageSize?: number;
  threadListTtlMs?: number;
  /** config.schemaContract: `freeze` quarantines drifted history entries and artifacts. */
  schemaContract?: 'evolve' | 'freeze';
}): EnrichOps {
  const log = o.log.child({ component: 'enrich' });
  const names = createThreadNames(o.api, o.db, log, o.threadListTtlMs);
  // One writer for every batch of this worker, so that pages of concurrent batches share statements.
  const pages = createPageWriter(o.pool);
  return {
    listPendingThreads: (input) => listPendingThreads(o.db, input).catch(warehouseFailure),
    enrichThreads: (input) =>
      enrichThreads(
        {
          db: o.db,
          pages,
          api: o.api,
          log,
          names,
          concurrency: o.concurrency,
          ...(o.pageSize ? { pageSize: o.pageSize } : {}),
          ...(o.schemaContract ? { schemaContract: o.schemaContract } : {}),
        },
        input,
      )
        // The rollups of the threads the batch stored (triggers marked them with each page); a
        // batch that throws leaves its marks to the next refresh.
        .then(async (counts) => {
          await refreshRollups(o.pool);
          return counts;
        })
        .catch(warehouseFailure),
  };
}

/**
 * A lost warehouse connection or a database timeout anywhere in a batch (reading the threads'
 * state, writing a page) fails it retryably under DB_UNAVAILABLE / DB_TIMEOUT: Temporal runs it
 * again, and each thread resumes from its stored position.
 */
function warehouseFailure(err: unknown): never {
  throw isRetryableDbError(err) ? toDbCrsError(err, 'INTERNAL', 'enrichment stopped by the warehouse') : err;
}
