import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import type { Warehouse } from '../warehouse/db.ts';
import { openRateBudget } from '../warehouse/rate-budget.ts';
import { createServiceClient, type ServiceClient, type ServiceClientOptions } from './client.ts';

/**
 * The service client of a worker: CRS_RATE_LIMIT_RPS is the tenant's limit, shared through the
 * warehouse by every worker with the same CRS_RATE_BUDGET name (src/api/shared-budget.ts), unless
 * CRS_RATE_BUDGET=off. `close` ends the budget's own database connection.
 */
export function createDeploymentClient(
  config: Config,
  warehouse: Warehouse,
  log: Logger,
  over: Partial<ServiceClientOptions> = {},
): { client: ServiceClient; close: () => Promise<void> } {
  const name = config.api.rateBudget;
  const budget = name ? openRateBudget(warehouse, name, log) : undefined;
  const client = createServiceClient(
    { ...config.api, concurrency: config.enrichConcurrency, ...(budget ? { budget } : {}), ...over },
    log,
  );
  if (budget)
    log.info(
      { budget: name, tenantRps: config.api.rateLimitRps },
      'request budget shared through the warehouse',
    );
  return { client, close: async () => budget?.close() };
}
