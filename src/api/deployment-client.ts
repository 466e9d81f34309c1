import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import type { Warehouse } from '../warehouse/db.ts';
import { openRateBudget } from '../warehouse/rate-budget.ts';
import { createServiceClient, type ServiceClient, type ServiceClientOptions } from './client.ts';

/**
 * The service client of a worker: CRS_RATE_LIMIT_RPS is the tenant's limit, shared through the
 * warehouse by every worker with the same CRS_SHARED_BUDGET_NAME name (src/api/shared-budget.ts), unless
 * CRS_SHARED_BUDGET_NAME=off. Workers asking for different limits share the lowest; CRS_SHARED_BUDGET_RPS,
 * set for the deployment, is the budget's limit whatever they ask (CRS_RATE_LIMIT_RPS still caps
 * each process). `close` ends the budget's own database connection.
 */
export function createDeploymentClient(
  config: Config,
  warehouse: Warehouse,
  log: Logger,
  over: Partial<ServiceClientOptions> = {},
): { client: ServiceClient; close: () => Promise<void> } {
  const name = config.api.rateBudget;
  const fixed = config.api.rateBudgetRps !== undefined;
  const budget = name ? openRateBudget(warehouse, name, log, { fixed }) : undefined;
  const client = createServiceClient(
    { ...config.api, concurrency: config.enrichConcurrency, ...(budget ? { budget } : {}), ...over },
    log,
  );
  if (budget)
    log.info(
      {
        budget: name,
        tenantRps: config.api.rateLimitRps,
        ...(fixed ? { deploymentRps: config.api.rateBudgetRps } : {}),
      },
      'request budget shared through the warehouse',
    );
  return { client, close: async () => budget?.close() };
}
