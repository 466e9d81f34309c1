/**
 * How long each dashboard page takes to load in headless Chromium, on a warehouse loaded from the
 * simulator (the loader over HTTP, then every thread enriched). Not a test: the figure the
 * README quotes. The 10M-row figure is the BI bench's (npm run bench:bi), which calls the same
 * measurePageLoads.
 *
 *   node test/dashboard/measure-page-load.ts [--days 30] [--records-per-day 1000] [--runs 5] [--no-enrich]
 *     [--keep] [--screenshot PATH]
 *
 * --screenshot saves the usage page (1280x900) as a PNG: the README's picture.
 *
 *   node test/dashboard/measure-page-load.ts --schema bench_bi [--runs 3]
 *
 * measures an existing warehouse instead (e.g. the 10M-row one `npm run bench:bi -- --keep`
 * leaves), over the pages' default range (the last 30 days of data), loading and dropping nothing.
 *
 * Uses DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) in a schema of its own,
 * dropped at the end unless --keep.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { createServiceClient } from '../../src/api/index.ts';
import { closedDayLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { launchChromium, measurePageLoads } from '../../src/dashboard/page-load.ts';
import { startDashboard } from '../../src/dashboard/server.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { loadExportDay } from '../../src/ingest/source/export-day.ts';
import { createLogger } from '../../src/log.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { openWarehouse } from '../../src/warehouse/db.ts';
import { dropSchema, migrateToLatest } from '../../src/warehouse/migrator.ts';

const { values: a } = parseArgs({
  options: {
    days: { type: 'string', default: '30' },
    'records-per-day': { type: 'string', default: '1000' },
    runs: { type: 'string', default: '5' },
    seed: { type: 'string', default: '42' },
    'no-enrich': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    screenshot: { type: 'string' },
    schema: { type: 'string' },
  },
});
const log = createLogger({ level: 'warn', pretty: false });
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
if (a.schema) {
  const existing = openWarehouse({ url, schema: a.schema, max: 4 });
  const dash = await startDashboard({ pool: existing.pool, port: 0 });
  try {
    const counts = (await existing.pool.query('select count(*) as messages from analytics_messages')).rows[0];
    const loads = await measurePageLoads({ baseUrl: dash.url, runs: Number(a.runs) });
    console.log(
      `warehouse: schema ${a.schema}, ${JSON.stringify(counts)}; the pages' default range (30 days)`,
    );
    console.log(`median of ${a.runs} loads after one warm-up\npage        load ms   of which db ms (server)`);
    for (const l of loads) {
      console.log(
        `${l.page.padEnd(11)} ${l.ms.toFixed(0).padStart(7)}   ${(l.dbMs ?? 0).toFixed(0).padStart(6)}`,
      );
    }
  } finally {
    await dash.close();
    await existing.close();
  }
  process.exit(0);
}
const schema = `dash_measure_${randomBytes(3).toString('hex')}`;
const sim = await startSimulator({
  seed: Number(a.seed),
  days: Number(a.days),
  recordsPerDay: Number(a['records-per-day']),
});
const w = openWarehouse({ url, schema, max: 8 });
try {
  await migrateToLatest(w);
  const config = parseConfig({ ...sim.env(), CRS_RATE_LIMIT_RPS: '10000' });
  const api = createServiceClient({ ...config.api, concurrency: 8 }, log);
  const days = sim.truth.days().slice(0, -1);
  const t0 = performance.now();
  for (const day of days)
    await loadExportDay(
      { warehouse: w, client: api, config, log },
      { target: closedDayLoad('measure', day) },
    );
  const loadS = (performance.now() - t0) / 1000;
  let enrichS = 0;
  if (!a['no-enrich']) {
    const t1 = performance.now();
    const ops = createEnrichOps({ db: w.db, pool: w.pool, api, log, concurrency: 8 });
    let after: string | null = null;
    for (;;) {
      const ids = await ops.listPendingThreads({ afterThreadId: after, limit: 200 });
      if (ids.length === 0) break;
      await ops.enrichThreads({ threadIds: ids, loadId: 'measure-enrich' });
      after = ids[ids.length - 1] ?? null;
    }
    enrichS = (performance.now() - t1) / 1000;
  }
  const counts = (
    await w.pool.query(
      `select (select count(*) from analytics_messages) as messages, (select count(*) from threads) as threads,
              (select count(*) from thread_messages) as entries, (select count(*) from citations) as citations`,
    )
  ).rows[0];
  const dash = await startDashboard({ pool: w.pool, port: 0 });
  try {
    const query = `from=${days[0]}&to=${days[days.length - 1]}`;
    const loads = await measurePageLoads({ baseUrl: dash.url, query, runs: Number(a.runs) });
    console.log(
      `warehouse: ${JSON.stringify(counts)} (${days.length} days; load ${loadS.toFixed(1)} s, enrich ${enrichS.toFixed(1)} s)`,
    );
    console.log(`range: ${query}, median of ${a.runs} loads after one warm-up`);
    console.log('page        load ms   of which db ms (server)');
    for (const l of loads)
      console.log(
        `${l.page.padEnd(11)} ${l.ms.toFixed(0).padStart(7)}   ${(l.dbMs ?? 0).toFixed(0).padStart(6)}`,
      );
    if (a.screenshot) {
      const browser = await launchChromium();
      try {
        const page = await browser.newPage();
        await page.goto(`${dash.url}/usage?${query}`, { waitUntil: 'load' });
        await page.waitForSelector('body[data-charts-drawn]');
        await page.screenshot({ path: a.screenshot });
        console.log(`saved ${a.screenshot}`);
      } finally {
        await browser.close();
      }
    }
  } finally {
    await dash.close();
  }
} finally {
  await sim.close();
  if (!a.keep) await dropSchema(w).catch(() => {});
  else console.log(`kept schema ${schema}`);
  await w.close();
}
