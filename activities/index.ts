import type { Activities } from '../contract/activities.ts';
import type { ServiceClient } from '../src/api/index.ts';
import type { Config } from '../src/config.ts';
import type { Logger } from '../src/log.ts';
import type { Warehouse } from '../src/warehouse/db.ts';
import { createAwaitActivities } from './await-workflow.ts';
import { createEnrichActivities } from './enrich.ts';
import { createLedgerActivities } from './ledger.ts';
import { createLiveness } from './liveness.ts';
import { createLoadActivities } from './load.ts';
import { createSemaphore } from './semaphore.ts';

export interface ActivityDeps {
  warehouse: Warehouse;
  /** The service client (src/api); the loader and the enrichment use it, no activity passes it on. */
  client: ServiceClient;
  config: Config;
  log: Logger;
  /**
   * Day loads running at once in this worker (default 2). Each holds CRS_LOAD_PARTITIONS
   * database connections for its whole length, so the pool is sized from this, and loads beyond
   * it wait here (heartbeating) instead of timing out on the pool.
   */
  maxDayLoads?: number;
}

export const DEFAULT_MAX_DAY_LOADS = 2;

/**
 * The activities of crs-sync (their names and types: contract/activities.ts), built from the
 * worker's dependencies, one module per concern: the ledger's bookkeeping (ledger.ts), the day
 * load (load.ts), the enrichment (enrich.ts) and waiting for another run (await-workflow.ts).
 * What they share is made here: one liveness writer and the worker's day-load slots. Arguments
 * and results are dates, ids and counts; credentials stay in `deps` on the worker.
 */
export function createActivities(deps: ActivityDeps): Activities {
  const { warehouse, client, config, log } = deps;
  const alive = createLiveness(warehouse.db, log);
  const slots = createSemaphore(deps.maxDayLoads ?? DEFAULT_MAX_DAY_LOADS);
  return {
    ...createLedgerActivities({ db: warehouse.db, pool: warehouse.pool, config, log }),
    ...createLoadActivities({ warehouse, client, config, log, slots, alive }),
    ...createEnrichActivities({ warehouse, client, config, log, alive }),
    ...createAwaitActivities(alive),
  };
}
