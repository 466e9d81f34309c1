import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createServiceClient, type ServiceClient } from '../../../src/api/index.ts';
import { type LoadCounts, pickCounts } from '../../../src/common/counts.ts';
import { dayLoad } from '../../../src/common/load-target.ts';
import { type Config, parseConfig } from '../../../src/config.ts';
import { LineDigest } from '../../../src/ingest/merge/resume.ts';
import { splitLines } from '../../../src/ingest/parse/line-splitter.ts';
import { loadExportDay } from '../../../src/ingest/source/export-day.ts';
import { createLogger, type Logger } from '../../../src/log.ts';
import { openWarehouse, type Warehouse } from '../../../src/warehouse/db.ts';
import { closeRun, startRun } from '../../../src/warehouse/ledger.ts';
import { dropSchema, migrateToLatest } from '../../../src/warehouse/migrator.ts';
import type { BenchServer, TableWrites } from './server.ts';
import type { ClockedSimulator, ExportShape } from './sim.ts';

/**
 * One scenario of bench:intraday: a fresh schema, the open day pulled at each tick of the
 * simulated clock exactly as syncIntraday's activity pulls it (loadExportDay of
 * an open day, the same loader function the worker's activity calls; no Temporal), then the
 * closed day pulled complete. Each pull is measured: wall time, this process's CPU (the loader;
 * the simulator runs in a process of its own), the server's CPU, WAL written, bytes read, and
 * the rows it made visible for the first time with their messages' times.
 */

export const APP_NAME = 'crs-bench-intraday';

export interface Pull {
  /** Simulated time of the pull (ms since epoch). */
  at: number;
  partial: boolean;
  wallMs: number;
  nodeCpuS: number;
  serverCpuS: number;
  walBytes: number;
  counts: LoadCounts;
  /** Rows of the day that first became visible with this pull. */
  newRows: number;
  /** How the export changed since the previous pull (intraday pulls only). */
  shape?: ExportShape;
}

export interface ScenarioResult {
  name: string;
  pulls: Pull[];
  /** Per message: first visible (tick + the pull's wall time) minus its Message Time, ms, sorted. */
  delaysMs: Float64Array;
  /**
   * The same per message, in two parts: the pull's tick minus the Message Time, and which pull
   * (an index into `pulls`): the extrapolation scales the pulls' wall times, not the clock.
   */
  firstSeen: { sinceTickMs: Float64Array; pull: Uint32Array };
  /** Rows of the day soft-deleted in the warehouse after the last partial pull (must be 0). */
  deletedAfterPartials: number;
  writes: TableWrites;
}

export interface ScenarioInput {
  name: string;
  day: string;
  /** Simulated times of the partial pulls of the open day. */
  ticks: number[];
  /** Simulated time of the closed day's complete pull. */
  closedAt: number;
  server: BenchServer;
  sim: ClockedSimulator;
  keep: boolean;
  /** False: the partial pulls skip no line as known (decision 0017), for the comparison. */
  knownLines?: boolean;
  /** After the closed-day pull: also measure the extra pulls of ExtraMeasures (once a run). */
  extras?: boolean;
  log: (s: string) => void;
}

/** What a re-pull of lines already loaded costs, against merely reading and verifying them. */
export interface ExtraMeasures {
  /** The closed day pulled again, complete, nothing changed: every line already seen. */
  unchanged: Pull;
  /** The same export downloaded, split into lines and each line's sha1 chained (resume.ts LineDigest). */
  readOnly: { wallMs: number; nodeCpuS: number; lines: number; bytes: number };
}

const quiet: Logger = createLogger({ level: 'silent', destination: process.stderr });

export async function runScenario(
  input: ScenarioInput,
): Promise<{ result: ScenarioResult; extras: ExtraMeasures | null }> {
  const { name, day, server, sim } = input;
  const schema = `bench_intraday_${name}`;
  const open = () => openWarehouse({ url: server.url, schema, max: 8, applicationName: APP_NAME });
  // Migrated by a pool closed before the counts are read, so its writes are not the pulls'.
  const m = open();
  await dropSchema(m);
  await migrateToLatest(m);
  await m.close();
  const before = await server.tableWrites(schema, APP_NAME);
  const w = open();
  const config = parseConfig({ CRS_SCHEMA: schema, ...sim.env });
  const client = createServiceClient({ ...config.api, concurrency: config.enrichConcurrency }, quiet);
  const pulls: Pull[] = [];
  const sinceTick: number[] = [];
  const pullOf: number[] = [];
  const pullAt = async (at: number, partial: boolean) => {
    await sim.setClock(at);
    const { pull, messageTimes } = await measuredPull({
      w,
      client,
      config,
      server,
      day,
      at,
      partial,
      knownLines: input.knownLines !== false,
    });
    for (const t of messageTimes) {
      sinceTick.push(at - t);
      pullOf.push(pulls.length);
    }
    pulls.push(pull);
    return pull;
  };
  for (const [i, at] of input.ticks.entries()) {
    const p = await pullAt(at, true);
    p.shape = await sim.exportShape(day, i === 0);
    if (i % 8 === 7 || i === input.ticks.length - 1)
      input.log(
        `  ${name}: ${new Date(at).toISOString().slice(11, 16)} ${p.counts.rowsRead} rows read, ${p.newRows} new, ${p.wallMs.toFixed(0)} ms`,
      );
  }
  const deletedAfterPartials = await countDeleted(w, day);
  const closed = await pullAt(input.closedAt, false);
  input.log(`  ${name}: closed-day pull ${closed.counts.rowsRead} rows, ${closed.wallMs.toFixed(0)} ms`);
  await w.close();
  const after = await server.tableWrites(schema, APP_NAME);
  const writes = {
    inserted: after.inserted - before.inserted,
    updated: after.updated - before.updated,
    deleted: after.deleted - before.deleted,
  };
  // After the table counts were read: the extra pulls are not the scenario's.
  let extras: ExtraMeasures | null = null;
  if (input.extras) {
    const x = open();
    const { pull: unchanged } = await measuredPull({
      w: x,
      client,
      config,
      server,
      day,
      at: input.closedAt,
      partial: false,
    });
    extras = { unchanged, readOnly: await readOnly(client, config, day) };
    await x.close();
  }
  if (!input.keep) {
    const d = open();
    await dropSchema(d);
    await d.close();
  }
  return {
    result: {
      name,
      pulls,
      delaysMs: Float64Array.from(sinceTick, (d, i) => d + pulls[pullOf[i]!]!.wallMs).sort(),
      firstSeen: { sinceTickMs: Float64Array.from(sinceTick), pull: Uint32Array.from(pullOf) },
      deletedAfterPartials,
      writes,
    },
    extras,
  };
}

interface PullDeps {
  w: Warehouse;
  client: ServiceClient;
  config: Config;
  server: BenchServer;
  day: string;
  at: number;
  partial: boolean;
  knownLines?: boolean;
}

/**
 * One pull, measured. The run's ledger row is written outside the measured span (the workflow's
 * beginRun and endRun activities); the span is the loader's call alone.
 */
async function measuredPull(d: PullDeps): Promise<{ pull: Pull; messageTimes: number[] }> {
  const { w, server, day, at, partial } = d;
  const runId = randomUUID();
  await startRun(w.db, {
    runId,
    kind: partial ? 'intraday' : 'scheduled',
    windowStart: day,
    windowEnd: day,
    workflowId: `bench-intraday-${runId}`,
  });
  const since = await w.pool.query<{ t: Date }>('select clock_timestamp() as t');
  const wal0 = await server.walLsn();
  const meter = server.meter(APP_NAME);
  const sampler = setInterval(() => void meter.sample(), 200);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let summary: LoadCounts;
  try {
    summary = await loadExportDay(
      { warehouse: w, client: d.client, config: d.config, log: quiet },
      {
        target: dayLoad(runId, day, partial),
        ...(d.knownLines === false ? { knownLines: false } : {}),
      },
    );
  } finally {
    clearInterval(sampler);
  }
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  // The meter's own samples ran in this process during the pull: not the loader's CPU.
  const meterCpuS = meter.ownSeconds();
  const serverCpuS = await meter.seconds();
  const walBytes = (await server.walLsn()) - wal0;
  const counts = pickCounts(summary);
  await closeRun(w.db, runId, 'succeeded', counts);
  // The rows this pull inserted (_first_loaded_at is set once, on insert): visible from the
  // pull's end at the latest, so their delay counts to the tick plus the pull's wall time.
  const fresh = await w.pool.query<{ t: string }>(
    `select (extract(epoch from message_time) * 1000)::float8 as t from analytics_messages
     where message_date = $1 and _first_loaded_at >= $2`,
    [day, since.rows[0]!.t],
  );
  return {
    messageTimes: fresh.rows.map((r) => Number(r.t)),
    pull: {
      at,
      partial,
      wallMs,
      nodeCpuS: (cpu.user + cpu.system) / 1e6 - meterCpuS,
      serverCpuS,
      walBytes,
      counts,
      newRows: fresh.rows.length,
    },
  };
}

async function countDeleted(w: Warehouse, day: string): Promise<number> {
  const r = await w.pool.query<{ n: string }>(
    'select count(*) as n from analytics_messages where message_date = $1 and _deleted_at is not null',
    [day],
  );
  return Number(r.rows[0]!.n);
}

/**
 * The least a pull that skips a verified prefix must still do with those bytes: download them,
 * split them into lines and chain each line's sha1, as a stream reopened after a cut is checked
 * (src/ingest/merge/resume.ts). No parse, no record hash, no warehouse.
 */
async function readOnly(
  client: ServiceClient,
  config: Config,
  day: string,
): Promise<ExtraMeasures['readOnly']> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const body = await client.exportMessages({ startDate: day, endDate: day });
  const digest = new LineDigest();
  let lines = 0;
  for await (const batch of splitLines(body, { maxLineBytes: config.maxLineBytes })) {
    for (const line of batch) {
      digest.take(line);
      lines++;
    }
  }
  const cpu = process.cpuUsage(cpu0);
  return {
    wallMs: performance.now() - t0,
    nodeCpuS: (cpu.user + cpu.system) / 1e6,
    lines,
    bytes: body.bytesRead,
  };
}
