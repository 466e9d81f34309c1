import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { shiftDay, utcDay } from '../../src/common/civil-date.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { syncWindow } from '../../workflows/index.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { until } from '../temporal/days.ts';
import { connectHarness, type TemporalHarness } from '../temporal/harness.ts';

const root = path.resolve(import.meta.dirname, '..', '..');

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (the subset of the format prom-client writes). */
function samples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries(
      [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]),
    );
    out.push({ name: m[1] ?? '', labels, value: Number(m[3]) });
  }
  return out;
}

function sum(all: Sample[], name: string, labels: Record<string, string> = {}): number {
  return all
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}

async function freePort(): Promise<number> {
  const s = createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function scrape(port: number): Promise<string | undefined> {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/metrics`);
    return r.ok ? await r.text() : undefined;
  } catch {
    return undefined;
  }
}

interface RunningWorker {
  child: ChildProcess;
  stderr: () => string;
}

// Two real `crs-sync worker` processes on one host (simulator, Postgres, the test run's dev server).
describe('the workers’ /metrics (two real worker processes on one host)', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator;
  const frozen = new Date();
  const day = shiftDay(utcDay(frozen), -2);
  const workers: RunningWorker[] = [];
  let port: number;
  let secondPort: number;

  beforeAll(async () => {
    h = await connectHarness('metrics');
    tw = await createTestWarehouse({ prefix: 'tmetrics' });
    // Broken lines on the way, so the quarantine counters have something to count.
    sim = await startSimulator({
      port: 0,
      now: () => frozen,
      seed: 21,
      days: 4,
      recordsPerDay: 300,
      faults: 'malformed=0.03',
    });
    port = await freePort();
  });

  afterAll(async () => {
    for (const w of workers)
      if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await sim?.close();
    await tw?.dispose();
    await h?.close();
  });

  function startWorker(): RunningWorker {
    const child = spawn(process.execPath, [path.join(root, 'bin', 'crs-sync.js'), 'worker'], {
      cwd: root,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ...sim.env(),
        DATABASE_URL: tw.url,
        CRS_SCHEMA: tw.schema,
        TEMPORAL_ADDRESS: h.address,
        TEMPORAL_NAMESPACE: h.namespace,
        TEMPORAL_TASK_QUEUE: h.taskQueue,
        TEMPORAL_SHUTDOWN_GRACE: '1s',
        CRS_METRICS_PORT: String(port),
        CRS_METRICS_HOST: '127.0.0.1',
        CRS_RATE_LIMIT_RPS: '1000',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr?.on('data', (b: Buffer) => {
      err += b.toString();
    });
    const w = { child, stderr: () => err };
    workers.push(w);
    return w;
  }

  const metricsWarnings = (w: RunningWorker) =>
    w
      .stderr()
      .split('\n')
      .filter((l) => l.includes('"msg":"metrics:'));

  it('when a second worker starts while the first holds CRS_METRICS_PORT, then both stay up and serve metrics, and the second warns once', async () => {
    const first = startWorker();
    const firstText = await until(() => scrape(port), 'the first worker to serve /metrics', 60_000);
    expect(firstText).toContain('crs_sync_rows_total{source="export",outcome="inserted"} 0');

    const second = startWorker();
    const warning = await until(
      async () => metricsWarnings(second)[0] ?? (second.child.exitCode !== null ? 'exited' : undefined),
      'the second worker to say where its metrics went',
      120_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; its stderr: ${second.stderr().slice(0, 2000)}`);
    });
    expect(warning).not.toBe('exited');
    secondPort = (JSON.parse(warning) as { port: number; taken: number }).port;
    expect(JSON.parse(warning)).toMatchObject({ level: 40, taken: port });
    expect(secondPort).toBeGreaterThan(port);
    expect(await scrape(secondPort)).toContain('crs_sync_rows_total');

    // Still up a while later, with that one warning about metrics and nothing else about them.
    await new Promise((r) => setTimeout(r, 3000));
    expect(first.child.exitCode).toBeNull();
    expect(second.child.exitCode).toBeNull();
    expect(metricsWarnings(second)).toHaveLength(1);
    expect(metricsWarnings(first)).toHaveLength(0);
    expect(await scrape(port)).toContain('crs_sync_days');
  }, 180_000);

  it('when a day is loaded through the workers, then their counters add up to the run’s figures and the gauges read the ledger, labelled by stable things only', async () => {
    expect(secondPort).toBeDefined();
    const result = await h.client.workflow.execute(syncWindow, {
      taskQueue: h.taskQueue,
      workflowId: `metrics-${day}`,
      args: [{ kind: 'manual', from: day, to: day, enrich: true }],
    });
    expect(result.totals.daysLoaded).toBe(1);
    expect(result.totals.inserted).toBeGreaterThan(100);
    expect(result.totals.rejected).toBeGreaterThan(0);
    expect(result.enrich?.done).toBeGreaterThan(0);

    // The gauges are cached a few seconds: wait for a scrape that has seen the finished day.
    const firstText = await until(
      async () => {
        const t = await scrape(port);
        return t && sum(samples(t), 'crs_sync_days', { status: 'complete' }) === 1 ? t : undefined;
      },
      'the first worker’s gauges to show the day complete',
      30_000,
    );
    const secondText = (await scrape(secondPort)) ?? '';
    const both = [...samples(firstText), ...samples(secondText)];

    // Counters: whichever worker ran an activity counted it, once.
    for (const outcome of ['inserted', 'updated', 'unchanged', 'deleted'] as const)
      expect(sum(both, 'crs_sync_rows_total', { source: 'export', outcome }), outcome).toBe(
        result.totals[outcome],
      );
    expect(sum(both, 'crs_sync_lines_read_total', { source: 'export' })).toBe(result.totals.rowsRead);
    expect(sum(both, 'crs_sync_lines_rejected_total', { source: 'export' })).toBe(result.totals.rejected);
    expect(sum(both, 'crs_sync_day_loads_total', { outcome: 'completed' })).toBe(1);
    expect(sum(both, 'crs_sync_day_loads_total', { outcome: 'failed' })).toBe(0);
    for (const outcome of ['done', 'deleted', 'forbidden', 'failed'] as const)
      expect(sum(both, 'crs_sync_enrich_threads_total', { outcome }), outcome).toBe(result.enrich?.[outcome]);

    // Gauges, from the warehouse the first worker reads.
    const first = samples(firstText);
    expect(sum(first, 'crs_sync_days', { status: 'failed' })).toBe(0);
    const openRejects = await tw.w.db
      .selectFrom('rejected_records')
      .select(['error_code', (eb) => eb.fn.countAll<number>().as('n')])
      .where('replayed_at', 'is', null)
      .groupBy('error_code')
      .execute();
    expect(openRejects.length).toBeGreaterThan(0);
    for (const r of openRejects)
      expect(sum(first, 'crs_sync_quarantine_open_lines', { code: r.error_code }), r.error_code).toBe(
        Number(r.n),
      );
    expect(sum(first, 'crs_sync_enrich_backlog_threads')).toBe(0);
    // The measures the quarantine_spike and budget_starved rules compare, read from the ledger.
    const share = (
      await tw.w.pool.query<{ s: number }>(
        'select max(rows_rejected::float8 / rows_read) as s from sync_days where rows_read > 0',
      )
    ).rows[0]!.s;
    expect(share).toBeGreaterThan(0);
    expect(sum(first, 'crs_sync_day_rejected_share_max')).toBeCloseTo(share, 9);
    expect(sum(first, 'crs_sync_budget_paused_seconds')).toBe(0);
    const age = first.find(
      (s) => s.name === 'crs_sync_freshness_age_seconds' && s.labels.source === 'export',
    );
    // The day before yesterday is the watermark: it ended a day and some hours ago.
    expect(age?.value).toBeGreaterThanOrEqual(86_400);
    expect(age?.value).toBeLessThan(2 * 86_400);
    const states = first.filter((s) => s.name === 'crs_sync_freshness_state' && s.labels.source === 'export');
    expect(states.filter((s) => s.value === 1).map((s) => s.labels.state)).toEqual([
      (age?.value ?? 0) > 26 * 3600 ? 'late' : 'on_time',
    ]);

    // The SDK's own series share the endpoint.
    expect(firstText).toMatch(/^temporal_\w+/m);

    // Labels: stable names with few values; never an id, a day or a load.
    const ours = both.filter((s) => s.name.startsWith('crs_sync_'));
    const labelNames = new Set(ours.flatMap((s) => Object.keys(s.labels)));
    expect(
      [...labelNames].filter(
        (l) => !['source', 'outcome', 'code', 'status', 'state', 'kind', 'drift', 'le'].includes(l),
      ),
    ).toEqual([]);
    const values = ours.flatMap((s) => Object.values(s.labels));
    expect(values.filter((v) => /\d{4}-\d{2}-\d{2}|[0-9a-f]{8}-[0-9a-f]{4}|load|manual-/i.test(v))).toEqual(
      [],
    );

    // Every series the shipped alert rules use is one these workers export.
    const rules = readFileSync(path.join(root, 'deploy', 'prometheus', 'crs-sync-rules.yml'), 'utf8');
    const named = new Set(
      (parse(rules) as { groups: { rules: { expr: string }[] }[] }).groups
        .flatMap((g) => g.rules)
        .flatMap((r) => [...r.expr.matchAll(/\bcrs_sync_\w+/g)].map((m) => m[0])),
    );
    const declared = new Set(
      [...firstText.matchAll(/^# TYPE (\w+) (\w+)$/gm)].flatMap((m) =>
        m[2] === 'histogram' ? [`${m[1]}_bucket`, `${m[1]}_sum`, `${m[1]}_count`] : [m[1]],
      ),
    );
    expect([...named].filter((n) => !declared.has(n))).toEqual([]);
  }, 240_000);
});
