/**
 * The enrichment of bench:backfill's bare path, in a process of its own like a worker: every
 * pending thread, shaped like the enrichPending workflow (pages of 25 × concurrency pending ids,
 * batches of 25, `CRS_ENRICH_CONCURRENCY` batches at once, one client and its rate limit shared
 * by all), but with plain function calls where the workflow has activities. Configured by the
 * same environment as `crs-sync worker`; prints its counts as JSON on stdout.
 */
import { createServiceClient } from '../../../src/api/index.ts';
import { parseConfig } from '../../../src/config.ts';
import { createEnrichOps } from '../../../src/enrich/index.ts';
import { isCrsError } from '../../../src/errors.ts';
import { createLogger } from '../../../src/log.ts';
import { openWarehouse } from '../../../src/warehouse/db.ts';
import { chunk, runBounded } from '../../../workflows/bounded.ts';

const BATCH = 25;
const config = parseConfig(process.env);
const log = createLogger({ level: 'warn', destination: process.stderr });
if (!config.databaseUrl) throw new Error('DATABASE_URL is required');
const w = openWarehouse({
  url: config.databaseUrl,
  schema: config.schema,
  max: config.enrichConcurrency + 2,
});
const api = createServiceClient({ ...config.api, concurrency: config.enrichConcurrency }, log);
const ops = createEnrichOps({
  db: w.db,
  pool: w.pool,
  api,
  log,
  concurrency: config.enrichConcurrency,
});
const totals = { threads: 0, done: 0, failed: 0 };

/** A batch that ends with threads still pending throws retryably; Temporal would run it again. */
async function batch(threadIds: string[]): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      const c = await ops.enrichThreads({ threadIds, loadId: 'bench-backfill' });
      totals.threads += c.threads;
      totals.done += c.done;
      totals.failed += c.failed;
      return;
    } catch (err) {
      if (!isCrsError(err) || !err.retryable || attempt >= 8) throw err;
    }
  }
}

let after: string | null = null;
for (;;) {
  const ids = await ops.listPendingThreads({ afterThreadId: after, limit: BATCH * config.enrichConcurrency });
  if (ids.length === 0) break;
  await runBounded(chunk(ids, BATCH), config.enrichConcurrency, batch);
  after = ids[ids.length - 1] ?? after;
}
await w.close();
process.stdout.write(`${JSON.stringify(totals)}\n`);
