import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shiftDay, utcDay } from '../../src/common/civil-date.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { watchWorkers } from '../../src/temporal/pollers.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { connectHarness, createTestWorker, type TemporalHarness } from './harness.ts';

const bin = path.resolve(import.meta.dirname, '..', '..', 'bin', 'crs-sync.js');

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

// `crs-sync sync|backfill|schedule` as a user runs them, against the dev server, with a worker
// (real activities, simulator, Postgres) in this process.
describe('the sync, backfill and schedule commands (dev server, real activities)', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator;
  const frozen = new Date();
  let worker: Worker;
  let badWorker: Worker;
  let running: Promise<void>[] = [];
  const cwd = mkdtempSync(path.join(tmpdir(), 'crs-cli-'));
  const today = utcDay(new Date());

  function cli(args: string[], taskQueue = h.taskQueue): Promise<CliResult> {
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        [bin, ...args],
        {
          cwd,
          env: {
            PATH: process.env.PATH,
            TEMPORAL_ADDRESS: h.address,
            TEMPORAL_NAMESPACE: h.namespace,
            TEMPORAL_TASK_QUEUE: taskQueue,
            // schedule create refuses to run without a warehouse (the embedded fallback).
            DATABASE_URL: tw.url,
            CRS_SCHEMA: tw.schema,
            LOG_LEVEL: 'warn',
          },
          timeout: 120_000,
        },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
    });
  }

  beforeAll(async () => {
    h = await connectHarness('cli');
    tw = await createTestWarehouse({ prefix: 'tcli' });
    sim = await startSimulator({
      port: 0,
      // A stopped clock: no record arrives late and no thread is deleted while the test compares.
      now: () => frozen,
      seed: 5,
      days: 6,
      recordsPerDay: 400,
      faults: 'none',
    });
    worker = await createTestWorker(h, {
      warehouse: tw.w,
      env: { ...sim.env(), CRS_RATE_LIMIT_RPS: '1000' },
    });
    // A worker whose service-account token the service refuses.
    const bad = { ...h, taskQueue: `${h.taskQueue}-bad` };
    badWorker = await createTestWorker(bad, {
      warehouse: tw.w,
      env: { ...sim.env(), CRS_SERVICE_ACCOUNT_TOKEN: 'not-the-token' },
    });
    running = [worker.run(), badWorker.run()];
  });

  afterAll(async () => {
    worker?.shutdown();
    badWorker?.shutdown();
    await Promise.all(running);
    await sim?.close();
    await tw?.dispose();
    await h?.close();
  });

  it('when sync runs over two days, then it follows the run to the end, prints a summary and exits 0', async () => {
    const from = shiftDay(today, -3);
    const to = shiftDay(today, -2);
    const r = await cli(['sync', '--from', from, '--to', to, '--no-enrich']);
    expect(r.stderr).not.toContain('unexpected');
    expect(r.code).toBe(0);
    const rows = sim.truth.exportDay(from).length + sim.truth.exportDay(to).length;
    expect(r.stdout).toContain(`succeeded: ${from} → ${to}, 2 day(s)`);
    expect(r.stdout).toContain(`rows: ${rows} read`);
    // A worker polls this queue: nothing to warn about.
    expect(r.stderr).not.toContain('no worker is polling');
  });

  it('when sync is started on a task queue no worker polls, then it says so at once, and cancel asks the run to stop and says a worker must carry it out', async () => {
    const idle = `${h.taskQueue}-idle`;
    const day = shiftDay(today, -6);
    const r = await cli(['sync', '--from', day, '--to', day, '--no-enrich', '--detach'], idle);
    expect(r.code, r.stderr).toBe(0);
    const id = r.stdout.trim();
    expect(r.stderr).toContain(
      `crs-sync: no worker is polling task queue ${idle} (namespace ${h.namespace}): ${id} waits`,
    );
    expect(r.stderr).toContain('crs-sync worker');

    const c = await cli(['cancel', id], idle);
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout).toContain(`cancellation of ${id} requested`);
    expect(c.stderr).toContain(`no worker is polling task queue ${idle}`);
    const events = (await h.client.workflow.getHandle(id).fetchHistory()).events ?? [];
    expect(events.some((e) => e.workflowExecutionCancelRequestedEventAttributes)).toBe(true);
    await h.client.workflow.getHandle(id).terminate('test cleanup');

    const unknown = await cli(['cancel', 'crs-sync-manual-no-such-run'], idle);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('nothing to cancel');
  });

  it('when a run waits on a task queue no worker polls, then the warning comes again while it waits, and once a worker polls it says so and stops', async () => {
    const late = `${h.taskQueue}-late`;
    const said: string[] = [];
    const sink = { write: (text: string) => said.push(text) > 0 } as unknown as NodeJS.WritableStream;
    // A short interval stands for the commands' 30 s.
    const watch = watchWorkers(h.client, late, 'the run', sink, 100);
    const waitFor = async (what: () => boolean, name: string) => {
      for (let i = 0; i < 600 && !what(); i++) await new Promise((res) => setTimeout(res, 50));
      expect(what(), name).toBe(true);
    };
    const warnings = () => said.filter((l) => l.includes(`no worker is polling task queue ${late}`)).length;
    let w: Worker | undefined;
    let running: Promise<void> | undefined;
    try {
      expect(await watch.first).toBe(0);
      await waitFor(() => warnings() >= 3, 'the warning three times');
      w = await createTestWorker({ ...h, taskQueue: late }, { warehouse: tw.w, env: sim.env() });
      running = w.run();
      await waitFor(
        () => said.some((l) => l.includes(`a worker is polling task queue ${late} now`)),
        'the all-clear',
      );
      const after = warnings();
      const cleared = said.length;
      // Nothing more once a worker polls: the next check would have come within 100 ms.
      await new Promise((res) => setTimeout(res, 500));
      expect(warnings()).toBe(after);
      expect(said.length).toBe(cleared);
    } finally {
      watch.stop();
      w?.shutdown();
      await running;
    }
  });

  it('when an attached sync waits on a task queue no worker polls and is interrupted, then its hint names a cancel command that exists and that a worker is needed', async () => {
    const idle = `${h.taskQueue}-idle2`;
    const day = shiftDay(today, -6);
    const child = spawn(process.execPath, [bin, 'sync', '--from', day, '--to', day, '--no-enrich'], {
      cwd,
      env: {
        PATH: process.env.PATH,
        TEMPORAL_ADDRESS: h.address,
        TEMPORAL_NAMESPACE: h.namespace,
        TEMPORAL_TASK_QUEUE: idle,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (b: Buffer) => {
      stderr += b.toString('utf8');
    });
    const exited = once(child, 'exit');
    let id: string | undefined;
    try {
      // The check comes right after the start (the first workflow task is never taken): 30 s is ample.
      for (let i = 0; i < 300 && !stderr.includes('no worker is polling'); i++) {
        await new Promise((res) => setTimeout(res, 100));
      }
      id = /started (\S+) on task queue/.exec(stderr)?.[1];
      expect(stderr).toContain(`no worker is polling task queue ${idle}`);
      expect(id).toBeDefined();
      child.kill('SIGINT');
      const [code] = await exited;
      expect(code).toBe(1);
      expect(stderr).toContain(`cancel it with: crs-sync cancel ${id} (a worker must be running`);
      expect(stderr).not.toContain('temporal workflow cancel');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      if (id) await h.client.workflow.getHandle(id).terminate('test cleanup');
    }
  });

  it('when sync is started with --detach, then it prints the workflow id and exits 0 while the run goes on', async () => {
    const day = shiftDay(today, -4);
    const r = await cli(['sync', '--from', day, '--to', day, '--no-enrich', '--detach']);
    expect(r.code).toBe(0);
    const id = r.stdout.trim();
    expect(id).toMatch(/^crs-sync-manual-/);
    const result = await h.client.workflow.getHandle(id).result();
    expect(result).toMatchObject({ from: day, to: day, days: 1 });
  });

  it('when sync runs with enrichment, then the threads its day queued are enriched and counted in the summary', async () => {
    const day = shiftDay(today, -5);
    const r = await cli(['sync', '--from', day, '--to', day]);
    expect(r.code).toBe(0);
    const m = /threads: (\d+) enriched \((\d+) done/.exec(r.stdout);
    expect(m, r.stdout).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThan(0);
    // The load's count is of a different thing, and says so: thread-days queued, not threads.
    const q =
      /enrichment queue: (\d+) thread-day\(s\) queued \(a thread with new messages on several days counts once per day\)/.exec(
        r.stdout,
      );
    expect(q, r.stdout).not.toBeNull();
    expect(r.stdout).not.toMatch(/\d+ thread\(s\) queued/);
    const pending = await tw.w.db
      .selectFrom('threads')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('enrich_status', '=', 'pending')
      .executeTakeFirstOrThrow();
    expect(Number(pending.n)).toBe(0);
  });

  it('when a backfill fails because the service refuses the token, then it exits 1 naming the days and the reason', async () => {
    const from = shiftDay(today, -3);
    const to = shiftDay(today, -2);
    const r = await cli(['backfill', '--from', from, '--to', to, '--no-enrich'], `${h.taskQueue}-bad`);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`crs-sync-backfill-${from}-${to} failed: 2 of 2 day(s) failed`);
    expect(r.stderr).toMatch(/HTTP 401/);
    expect(r.stderr).not.toContain('not-the-token');
  });

  it('when a date is not a date, then backfill exits 2 without starting anything', async () => {
    const r = await cli(['backfill', '--from', '2025-02-30', '--to', '2025-03-02']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--from: "2025-02-30" is not a date');
  });

  it('when there is no schedule, then schedule describe exits 2 and says how to create one', async () => {
    const r = await cli(['schedule', 'describe']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('crs-sync schedule create');
  });

  it('when the schedule is managed from the command line, then create, describe, pause, unpause and delete each do what they say', async () => {
    const created = await cli(['schedule', 'create', '--cron', '0 3 * * *', '--timezone', 'Asia/Tokyo']);
    expect(created).toMatchObject({ code: 0 });
    expect(created.stdout).toContain('schedule crs-sync-daily created');
    const described = await cli(['schedule', 'describe']);
    expect(described.code).toBe(0);
    expect(described.stdout).toContain('0 3 * * * (Asia/Tokyo)');
    expect(described.stdout).toContain('state      active');
    expect((await cli(['schedule', 'pause', '--note', 'freeze'])).code).toBe(0);
    expect((await cli(['schedule', 'describe'])).stdout).toContain('state      paused (freeze)');
    expect((await cli(['schedule', 'unpause'])).code).toBe(0);
    const json = JSON.parse((await cli(['schedule', 'describe', '--json'])).stdout) as {
      daily: { state: { paused: boolean }; policies: { overlap: string } };
      intraday: null;
    };
    expect(json.daily.state.paused).toBe(false);
    expect(json.daily.policies.overlap).toBe('BUFFER_ONE');
    expect(json.intraday).toBeNull();
    expect((await cli(['schedule', 'delete'])).code).toBe(0);
    expect((await cli(['schedule', 'describe'])).code).toBe(2);
  });

  it('when both schedules exist, then describe shows both, the intraday one in words; trigger on a queue no worker polls says so', async () => {
    const idle = `${h.taskQueue}-idle3`;
    expect((await cli(['schedule', 'create'], idle)).code).toBe(0);
    expect((await cli(['schedule', 'create', '--intraday', '15m'], idle)).code).toBe(0);
    try {
      const d = await cli(['schedule', 'describe']);
      expect(d.code, d.stderr).toBe(0);
      expect(d.stdout).toContain('schedule   crs-sync-daily (daily)');
      expect(d.stdout).toContain('30 0 * * * (UTC)');
      expect(d.stdout).toContain('schedule   crs-sync-intraday (intraday)');
      expect(d.stdout).toContain(
        'every 15m, the open UTC day as a partial day (its rows so far, nothing deleted); from 00:30 UTC the day that just closed, once, as a complete day',
      );
      expect(d.stdout).not.toContain('()');
      const only = await cli(['schedule', 'describe', '--intraday']);
      expect(only.stdout).not.toContain('crs-sync-daily');
      const json = JSON.parse((await cli(['schedule', 'describe', '--json'])).stdout);
      expect(json.intraday.scheduleId).toBe('crs-sync-intraday');
      expect(json.daily.scheduleId).toBe('crs-sync-daily');

      const t = await cli(['schedule', 'trigger', '--intraday']);
      expect(t.code, t.stderr).toBe(0);
      expect(t.stdout).toContain('schedule crs-sync-intraday triggered');
      expect(t.stderr).toContain(`no worker is polling task queue ${idle}`);
    } finally {
      for (const id of ['crs-sync-intraday', 'crs-sync-daily']) {
        const handle = h.client.schedule.getHandle(id);
        const running = (await handle.describe()).info.runningActions;
        await handle.delete();
        for (const a of running)
          await h.client.workflow.getHandle(a.workflow.workflowId).terminate('test cleanup');
      }
    }
  });

  it('when every workflow history of these runs is read, then no credential is in it', async () => {
    const c = sim.credentials;
    const secrets = [c.serviceAccountToken, c.accessToken, c.clientSecret, c.apiKey, 'not-the-token'];
    let n = 0;
    for await (const w of h.client.workflow.list()) {
      const history = await h.client.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
      const json = JSON.stringify(history, (_k, v) =>
        v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : v,
      );
      for (const s of secrets) expect(json.includes(s), `${w.workflowId}`).toBe(false);
      n++;
    }
    // Syncs, backfills, their days and the enrichment stream.
    expect(n).toBeGreaterThan(8);
  });
});
