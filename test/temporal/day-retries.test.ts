import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Worker } from '@temporalio/worker';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dayWorkflowId } from '../../contract/workflows.ts';
import type { AlertPayload } from '../../src/alerts/message.ts';
import { type AlertSettings, runAlertPass, startAlertMonitor } from '../../src/alerts/monitor.ts';
import { createServiceClient } from '../../src/api/index.ts';
import { parseConfig } from '../../src/config.ts';
import { startDashboard } from '../../src/dashboard/server.ts';
import { createLogger } from '../../src/log.ts';
import { pipelineMetricsText } from '../../src/metrics/pipeline.ts';
import { type Simulator, type SimulatorOptions, startSimulator } from '../../src/simulator/index.ts';
import { readStatus } from '../../src/warehouse/read/status.ts';
import { syncIntraday, syncWindow } from '../../workflows/index.ts';
import { cliSync } from '../helpers/cli.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { until } from './days.ts';
import { connectHarness, createTestWorker, type TemporalHarness } from './harness.ts';
import { expectedRows, warehouseRows } from './truth.ts';

/**
 * A day's state while the service is away, as an operator meets it: the real activities and
 * workflows on the dev server, real Postgres, the simulator over HTTP, stopped and started again
 * on its port (an outage: connection refused), the alert monitor checking every 200 ms and posting
 * to a local webhook receiver, `crs-sync status` run as a command. The retries are the day load's
 * own policy (5 s, then 10 s) where a test reads its intervals; elsewhere the run sets a shorter
 * first interval (the workflows' `retryInterval`), the same policy otherwise: 12 attempts,
 * doubling. The HTTP client's own retries are kept to milliseconds.
 */

const log = createLogger({ level: 'silent', pretty: false });

// Each test waits out one or two of the load's retry intervals besides its loads.
describe('a day load that fails and is retried (simulator, Postgres, dev server, webhook)', {
  timeout: 180_000,
}, () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator | null = null;
  let port = 0;
  // The simulator's clock stands still (its days and data are those of this instant).
  let clock = Date.parse('2026-11-22T12:00:00Z');
  const simOptions = (o: Partial<SimulatorOptions> = {}): SimulatorOptions => ({
    port,
    now: () => new Date(clock),
    seed: 31,
    days: 8,
    recordsPerDay: 300,
    ...o,
  });
  let receiver: Server;
  let receiverUrl: string;
  let received: AlertPayload[] = [];
  let runs = 0;

  // The service's settings (the same seed gives a restarted simulator the same credentials).
  let simEnv: Record<string, string> = {};
  const startSim = async (o: Partial<SimulatorOptions> = {}) => {
    sim = await startSimulator(simOptions(o));
    port = sim.port;
    simEnv = sim.env();
    return sim;
  };
  /** The service goes away: its port refuses connections, and requests in flight are cut. */
  const stopSim = async () => {
    await sim?.close();
    sim = null;
  };
  const env = () => parseConfig({ ...simEnv, CRS_RATE_LIMIT_RPS: '1000' });
  /** A worker whose HTTP client retries within milliseconds: each day load attempt fails fast. */
  const worker = async (): Promise<Worker> => {
    const config = env();
    const client = createServiceClient(
      { ...config.api, concurrency: 2, baseBackoffMs: 5, maxBackoffMs: 20 },
      log,
    );
    return createTestWorker(h, { warehouse: tw.w, env: simEnv, client });
  };
  const settings = (o: Partial<AlertSettings> = {}): AlertSettings => ({
    freshnessSlaSeconds: 90 * 86_400,
    quarantineShare: 0.5,
    budgetWaitMs: 300_000,
    urls: [receiverUrl],
    timeoutMs: 2_000,
    checkIntervalMs: 200,
    ...o,
  });
  const messages = (kind: string) => received.filter((m) => m.event.kind === kind);
  const dayRow = async (day: string) =>
    tw.w.db.selectFrom('sync_days').selectAll().where('day', '=', day).executeTakeFirst();
  const failedDayCount = async () =>
    Number(
      (await tw.w.pool.query<{ n: string }>(`select count(*) as n from sync_days where status = 'failed'`))
        .rows[0]?.n,
    );
  /** Temporal's own view of the day's load: the attempt it is at, from the pending activity. */
  const pendingLoad = async (day: string) => {
    try {
      const d = await h.client.workflow.getHandle(dayWorkflowId(day)).describe();
      return d.raw.pendingActivities?.find((a) => a.activityType?.name === 'loadExportDay');
    } catch {
      return undefined;
    }
  };
  const cli = (args: string[]) =>
    cliSync(args, { env: { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema }, tmpPrefix: 'crs-retries-' });
  const failedLoads = async () => {
    const m = /^crs_sync_day_loads_total\{outcome="failed"\} (\d+)$/m.exec(await pipelineMetricsText());
    return Number(m?.[1]);
  };
  /**
   * A manual sync of the days; `retryInterval` the first pause between two attempts of a day load
   * (absent: the policy's 5 s). Where a test restarts the service between two attempts while a
   * worker runs, the pause must outlast that restart: 2 s, then 4 s.
   */
  const sync = (from: string, to: string, retryInterval?: string) =>
    h.client.workflow.start(syncWindow, {
      taskQueue: h.taskQueue,
      workflowId: `retries-${++runs}`,
      args: [
        {
          kind: 'manual',
          from,
          to,
          concurrency: 1,
          enrich: false,
          ...(retryInterval ? { retryInterval } : {}),
        },
      ],
    });

  beforeAll(async () => {
    h = await connectHarness('retries');
    tw = await createTestWarehouse({ prefix: 'tretry' });
    await startSim();
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as AlertPayload);
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/retries`;
  });
  afterEach(async () => {
    received = [];
    // The next test starts with the service up and without faults.
    await stopSim();
    await startSim();
  });
  afterAll(async () => {
    await sim?.close();
    receiver?.closeAllConnections();
    await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
    await tw?.dispose();
    await h?.close();
  });

  it('when the service is unreachable mid-sync for less than the retry window, then no day reads failed, no day_failed message is sent, and the day completes by itself', async () => {
    const [d1, d2] = ['2026-11-16', '2026-11-17'];
    // Every answer of the simulator waits at a gate this test opens: the first day's export is
    // let through, the second day's is still waiting when the service goes away.
    await stopSim();
    const held: (() => void)[] = [];
    await startSim({ faults: 'latency=1ms', sleep: () => new Promise<void>((r) => held.push(r)) });
    const monitor = startAlertMonitor(tw.w.db, settings(), log);
    const w = await worker();
    const seen = new Set<string>();
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const r = await dayRow(d2);
        if (r) seen.add(r.status);
        await new Promise((x) => setTimeout(x, 50));
      }
    })();
    try {
      const run = await sync(d1, d2, '2s');
      await w.runUntil(async () => {
        await until(async () => held.length > 0, 'the first day to ask for its export');
        held.shift()?.();
        await until(
          async () => (await dayRow(d1))?.status === 'complete' && held.length > 0,
          'the second day to ask for its export',
        );
        await stopSim();
        // Two attempts of the second day fail while the service is away (Temporal waits 2 s, then 4 s).
        await until(async () => ((await pendingLoad(d2))?.attempt ?? 0) >= 3, 'two failed attempts', 60_000);
        expect((await dayRow(d2))?.status).toBe('running');
        await startSim();
        await run.result();
      });
      await runAlertPass(tw.w.db, settings(), log);
    } finally {
      watching = false;
      await watch;
      await monitor.stop();
    }
    expect(messages('day_failed')).toEqual([]);
    expect([...seen].sort()).toEqual(['complete', 'running']);
    expect(await failedDayCount()).toBe(0);
    expect(await dayRow(d2)).toMatchObject({
      status: 'complete',
      attempt: 3,
      last_error: null,
      last_error_code: null,
      next_attempt_at: null,
    });
    expect(await warehouseRows(tw.w, [d1, d2])).toEqual(expectedRows(sim!, [d1, d2]));
  });

  it('when a day load attempt has failed and the next one is due, then status, status --json and sync_health show it retrying with its error, attempt and next attempt time', async () => {
    const day = '2026-11-18';
    await stopSim();
    // The first attempt fails while the service is away; the worker then stops, so the day
    // waits for its second attempt for as long as this test reads it.
    const w = await worker();
    const run = await sync(day, day);
    const running = w.run();
    const pending = await until(async () => {
      const p = await pendingLoad(day);
      return p && (p.attempt ?? 0) >= 2 ? p : undefined;
    }, 'the first attempt to fail');
    w.shutdown();
    await running;

    const row = await dayRow(day);
    expect(row).toMatchObject({
      status: 'running',
      attempt: 1,
      max_attempts: 12,
      last_error_code: 'HTTP_NETWORK',
    });
    // The next attempt is the retry policy's first interval after the failure, and Temporal's own.
    expect(row!.next_attempt_at!.getTime() - row!.last_error_at!.getTime()).toBe(5_000);
    const next = pending.nextAttemptScheduleTime;
    const temporalNext = Number(String(next?.seconds ?? 0)) * 1000 + Math.floor((next?.nanos ?? 0) / 1e6);
    expect(Math.abs(temporalNext - row!.next_attempt_at!.getTime())).toBeLessThan(5_000);

    const json = cli(['status', '--json']);
    expect(json.code).toBe(0);
    const s = JSON.parse(json.stdout) as Awaited<ReturnType<typeof readStatus>>;
    expect(s.days.retrying).toBe(1);
    expect(s.days.failed).toBeUndefined();
    expect(s.failedDays).toEqual([]);
    expect(s.retryingDays).toEqual([
      {
        day,
        loadId: row!._load_id,
        attempt: 1,
        maxAttempts: 12,
        lastError: expect.stringMatching(/network error/),
        errorCode: 'HTTP_NETWORK',
        failedAt: row!.last_error_at!.toISOString(),
        nextAttemptAt: row!.next_attempt_at!.toISOString(),
      },
    ]);
    // Retrying is not failing; a missing state is not a state either.
    expect(['on_time', 'late', 'no_data']).toContain(s.freshness.export.state);

    const text = cli(['status']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^days {8}.*retrying 1/m);
    expect(text.stdout).toContain('Retrying days');
    const line = text.stdout.split('\n').find((l) => l.includes(day) && l.includes('1 of 12'));
    expect(line).toContain(row!.next_attempt_at!.toISOString().slice(0, 19).replace('T', ' '));
    expect(line).toContain('HTTP_NETWORK');
    expect(line).toContain('network error');
    expect(text.stdout).not.toContain('Failed days');

    const health = (
      await tw.w.pool.query(
        `select failed_days, running_days, retrying_days, retrying_day::text as day, retrying_attempt,
                retrying_max_attempts, retrying_last_error, retrying_error_code, retrying_next_attempt_at,
                export_freshness
           from sync_health`,
      )
    ).rows[0];
    expect(health).toMatchObject({
      failed_days: 0,
      running_days: 1,
      retrying_days: 1,
      day,
      retrying_attempt: 1,
      retrying_max_attempts: 12,
      retrying_last_error: row!.last_error,
      retrying_error_code: 'HTTP_NETWORK',
      retrying_next_attempt_at: row!.next_attempt_at,
    });
    expect(['on_time', 'late', 'no_data']).toContain(health.export_freshness);

    const dash = await startDashboard({ pool: tw.w.pool, port: 0 });
    try {
      const api = (await (await fetch(`${dash.url}/api/health`)).json()) as {
        sections: Record<string, { ok: boolean; data: unknown }>;
      };
      expect(api.sections.retrying).toEqual({
        ok: true,
        data: [
          {
            day,
            attempt: 1,
            maxAttempts: 12,
            lastError: row!.last_error,
            errorCode: 'HTTP_NETWORK',
            nextAttemptAt: expect.any(String),
          },
        ],
      });
      const shown = (api.sections.retrying!.data as { nextAttemptAt: string }[])[0]!.nextAttemptAt;
      expect(new Date(shown).getTime()).toBe(row!.next_attempt_at!.getTime());
      expect(api.sections.health?.data).toMatchObject({ failedDays: 0, runningDays: 1, retryingDays: 1 });
      const html = await (await fetch(`${dash.url}/health`)).text();
      const table = html.slice(html.indexOf('data-table="retryingDays"'));
      expect(table).toContain(day);
      expect(table).toContain('1 of 12');
      expect(table).toContain('HTTP_NETWORK');
    } finally {
      await dash.close();
    }

    // The service is back and a worker runs again: the second attempt loads the day.
    await startSim();
    const again = await worker();
    await again.runUntil(run.result());
    expect(await dayRow(day)).toMatchObject({ status: 'complete', attempt: 2, last_error: null });
    expect(cli(['status', '--json']).stdout).toContain('"retryingDays": []');
  });

  it('when a day load fails twice and then meets an error no retry can fix, then the day is failed once, and status, the alert, the metric and Temporal all count 3 attempts', async () => {
    const day = '2026-11-19';
    // Loaded once before: the ledger's count of every attempt ever (1 + 3) is not this load's.
    const w0 = await worker();
    await w0.runUntil((await sync(day, day)).result());
    const failedBefore = await failedLoads();

    await stopSim();
    const monitor = startAlertMonitor(tw.w.db, settings(), log);
    const w = await worker();
    const run = await sync(day, day, '2s');
    try {
      await w.runUntil(async () => {
        await until(async () => ((await pendingLoad(day))?.attempt ?? 0) >= 3, 'two failed attempts', 60_000);
        // The service comes back refusing the service account's token: 401, not retryable.
        await startSim({ faults: 'expire=1' });
        await expect(run.result()).rejects.toThrow();
      });
      await runAlertPass(tw.w.db, settings(), log);
    } finally {
      await monitor.stop();
    }

    // Temporal's count: the attempt its history records for the day's load activity.
    const events = (await h.client.workflow.getHandle(dayWorkflowId(day)).fetchHistory()).events ?? [];
    const load = events.find(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'loadExportDay',
    );
    const started = events.find(
      (e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === String(load?.eventId),
    );
    expect(started?.activityTaskStartedEventAttributes?.attempt).toBe(3);

    const json = JSON.parse(cli(['status', '--json']).stdout) as Awaited<ReturnType<typeof readStatus>>;
    expect(json.failedDays).toEqual([
      {
        day,
        attempts: 3,
        lastError: expect.stringMatching(/HTTP 401/),
        errorCode: 'HTTP_UNAUTHORIZED',
        failedAt: expect.any(String),
      },
    ]);
    const firing = messages('day_failed');
    expect(firing.map((m) => m.event.state)).toEqual(['firing']);
    expect(firing[0]!.text).toContain(
      `day ${day} failed: its load gave up after 3 attempts (HTTP_UNAUTHORIZED)`,
    );
    expect(firing[0]!.text).not.toMatch(/after \d+ attempts.*after \d+ attempts/s);
    expect(firing[0]!.event.details).toMatchObject({ day, attempts: 3, code: 'HTTP_UNAUTHORIZED' });
    expect(await failedLoads()).toBe(failedBefore + 1);

    // Loaded again once the service takes the token: one RESOLVED, saying what resolved it.
    received = [];
    await stopSim();
    await startSim();
    const w2 = await worker();
    await w2.runUntil((await sync(day, day)).result());
    await runAlertPass(tw.w.db, settings(), log);
    const resolved = messages('day_failed');
    expect(resolved.map((m) => m.event.state)).toEqual(['resolved']);
    expect(resolved[0]!.text).toMatch(
      new RegExp(
        `^crs-sync \\[RESOLVED\\] day_failed: day ${day} loaded complete at \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC after 1 attempt$`,
      ),
    );
    expect(resolved[0]!.event.summary).not.toContain('401');
    expect(await failedLoads()).toBe(failedBefore + 1);
  });

  it('when an intraday pull of the open day fails, then the day stays partial with its error, no day_failed opens, and open_day_stale fires only once it has not been pulled for CRS_OPEN_DAY_STALE_AFTER', async () => {
    const today = '2026-11-22';
    // The worker stops before the service returns, so the retry waits for the next one: 1 s is enough.
    const intraday = (now: string) =>
      h.client.workflow.start(syncIntraday, {
        taskQueue: h.taskQueue,
        workflowId: `retries-intraday-${++runs}`,
        args: [{ enrich: false, now, retryInterval: '1s' }],
      });
    const w0 = await worker();
    await w0.runUntil((await intraday('2026-11-22T12:00:00Z')).result());
    const pulled = await dayRow(today);
    expect(pulled).toMatchObject({ status: 'partial', last_error: null });
    const failedBefore = await failedLoads();

    clock = Date.parse('2026-11-22T13:00:00Z');
    await stopSim();
    const w = await worker();
    const run = await intraday('2026-11-22T13:00:00Z');
    const s = await w.runUntil(async () => {
      await until(async () => ((await pendingLoad(today))?.attempt ?? 0) >= 2, 'the pull to fail once');
      return readStatus(tw.w.db);
    });

    const row = await dayRow(today);
    expect(row).toMatchObject({
      status: 'partial',
      last_error_code: 'HTTP_NETWORK',
      attempt: 1,
      pulled_at: pulled!.pulled_at,
      rows_read: pulled!.rows_read,
    });
    // The run's retryInterval reached the load's retry policy (the policy's own is 5 s).
    expect(row!.next_attempt_at!.getTime() - row!.last_error_at!.getTime()).toBe(1_000);
    expect(s.days).toMatchObject({ partial: 1 });
    expect(s.days.failed).toBeUndefined();
    expect(s.partialDays).toEqual([
      {
        day: today,
        lastPullAt: pulled!.pulled_at!.toISOString(),
        rows: pulled!.rows_read,
        lastError: row!.last_error,
        errorCode: 'HTTP_NETWORK',
        attempt: 1,
        nextAttemptAt: row!.next_attempt_at!.toISOString(),
      },
    ]);
    expect(s.freshness.export.open_day).toMatchObject({ day: today, last_error: row!.last_error });

    const stale = settings({ openDayStaleAfterSeconds: 3 * 3600 });
    await runAlertPass(tw.w.db, stale, log);
    expect(received).toEqual([]);
    // Three hours later with no pull finished (the clock moved on in the table, not waited for).
    await tw.w.pool.query(`update sync_days set pulled_at = pulled_at - interval '4 hours' where day = $1`, [
      today,
    ]);
    await runAlertPass(tw.w.db, stale, log);
    expect(messages('day_failed')).toEqual([]);
    expect(messages('open_day_stale').map((m) => m.event.state)).toEqual(['firing']);
    expect(messages('open_day_stale')[0]!.text).toContain(`the open day ${today} was last pulled 4 h ago`);
    expect(messages('open_day_stale')[0]!.text).toContain('network error');

    // The service is back: the retry pulls the day, which stays partial, and the alert resolves.
    await startSim();
    const again = await worker();
    await again.runUntil(run.result());
    expect(await dayRow(today)).toMatchObject({ status: 'partial', last_error: null, next_attempt_at: null });
    await runAlertPass(tw.w.db, stale, log);
    expect(messages('open_day_stale').map((m) => m.event.state)).toEqual(['firing', 'resolved']);
    expect(messages('day_failed')).toEqual([]);
    expect(await failedDayCount()).toBe(0);
    expect(await failedLoads()).toBe(failedBefore);
  });
});
