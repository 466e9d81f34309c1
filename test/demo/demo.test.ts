import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { demoDataset, demoWindow } from '../../src/demo/options.ts';
import type { DemoSummary } from '../../src/demo/summary.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { openWarehouse, type Warehouse } from '../../src/warehouse/db.ts';
import { dropSchema } from '../../src/warehouse/migrator.ts';

/**
 * `crs-sync demo` end to end, as a user runs it (the real CLI in a child process): a 3-day window
 * against the test run's Postgres (a schema of its own) and Temporal dev server (a namespace of
 * its own, so its day workflow ids meet no other test's). Its JSON summary is checked against the
 * warehouse tables and against what the simulator serves for those days. Its warehouse is given
 * as a secret file (DATABASE_URL_FILE), beside a file of the real service's API key, which the
 * demo, talking to its own simulator, must set aside rather than refuse as set twice.
 */

const root = path.resolve(import.meta.dirname, '..', '..');
const cli = path.join(root, 'bin', 'crs-sync.js');
const DAYS = 3;
const RECORDS_PER_DAY = 40;
const SEED = 7;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runCli(args: string[], env: Record<string, string>): { child: ChildProcess; done: Promise<Run> } {
  const child = spawn(process.execPath, [cli, ...args], {
    cwd: root,
    // A clean environment: nothing of the developer's .env or shell reaches the demo.
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      CRS_ENV_FILE: '/nonexistent',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (b: Buffer) => {
    stdout += b.toString('utf8');
  });
  child.stderr?.on('data', (b: Buffer) => {
    stderr += b.toString('utf8');
  });
  const done = once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }));
  return { child, done };
}

/** Registers a namespace on the dev server and waits until it serves requests. */
async function createNamespace(address: string, namespace: string): Promise<void> {
  const c = await Connection.connect({ address });
  try {
    await c.workflowService.registerNamespace({
      namespace,
      workflowExecutionRetentionPeriod: msToTs('1 day'),
    });
    for (let i = 0; ; i++) {
      try {
        await c.workflowService.listWorkflowExecutions({ namespace, pageSize: 1 });
        return;
      } catch (err) {
        if (i > 100) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    await c.close();
  }
}

describe('crs-sync demo', () => {
  const schema = `demo_${randomBytes(4).toString('hex')}`;
  const namespace = `demo-${randomBytes(4).toString('hex')}`;
  let w: Warehouse;
  let run: Run;
  let summary: DemoSummary;

  beforeAll(async () => {
    const url = inject('databaseUrl');
    const address = inject('temporalAddress');
    await createNamespace(address, namespace);
    w = openWarehouse({ url, schema, max: 4 });
    const secrets = mkdtempSync(path.join(tmpdir(), 'crs-demo-secrets-'));
    writeFileSync(path.join(secrets, 'database-url'), `${url}\n`);
    writeFileSync(path.join(secrets, 'api-key'), 'the-real-services-api-key\n');
    run = await runCli(
      [
        'demo',
        '--days',
        String(DAYS),
        '--records-per-day',
        String(RECORDS_PER_DAY),
        '--seed',
        String(SEED),
        '--json',
        '--temporal-address',
        address,
      ],
      {
        DATABASE_URL_FILE: path.join(secrets, 'database-url'),
        CRS_API_KEY_FILE: path.join(secrets, 'api-key'),
        CRS_SCHEMA: schema,
        TEMPORAL_NAMESPACE: namespace,
        LOG_LEVEL: 'warn',
      },
    ).done;
    if (run.code !== 0) throw new Error(`demo exited ${run.code}:\n${run.stderr}`);
    summary = JSON.parse(run.stdout) as DemoSummary;
  }, 240_000);

  afterAll(async () => {
    if (w) {
      await dropSchema(w).catch(() => {});
      await w.close();
    }
  });

  const count = async (sql: string): Promise<number> => Number((await w.pool.query(sql)).rows[0].n);

  it('when it runs on a shortened window, then it exits 0 with a JSON summary of that window', () => {
    expect(run.code).toBe(0);
    expect(summary.ok).toBe(true);
    expect(summary.window).toEqual({ ...demoWindow(DAYS, new Date()), days: DAYS });
    expect(summary.warehouse.schema).toBe(schema);
    expect(summary.temporal).toMatchObject({ namespace, own: false });
    expect(summary.backfill.failedDays).toEqual([]);
    expect(summary.elapsedMs).toBeGreaterThan(0);
  });

  it('when the summary counts days, rows, threads, history, citations, artifacts and rejects, then each equals the warehouse', async () => {
    const f = summary.figures;
    expect(f.daysComplete).toBe(DAYS);
    expect(await count(`select count(*) as n from sync_days where status = 'complete'`)).toBe(DAYS);
    expect(f.rows).toBe(
      await count('select count(*) as n from analytics_messages where _deleted_at is null'),
    );
    const threads = await w.pool.query<{ s: string; n: string }>(
      'select enrich_status as s, count(*) as n from threads group by 1',
    );
    expect(f.threads).toEqual(Object.fromEntries(threads.rows.map((r) => [r.s, Number(r.n)])));
    expect(f.threadMessages).toBe(await count('select count(*) as n from thread_messages'));
    expect(f.citations).toBe(await count('select count(*) as n from citations'));
    expect(f.artifacts).toBe(await count('select count(*) as n from artifacts'));
    expect(f.rejectsTotal).toBe(
      await count('select count(*) as n from rejected_records where replayed_at is null'),
    );
    expect(summary.backfill.rowsRead).toBe(await count('select sum(rows_read) as n from sync_days'));
    // Enrichment ran: every thread was visited and history, citations and artifacts were stored.
    expect(f.threads.pending ?? 0).toBe(0);
    expect(f.threadMessages).toBeGreaterThan(0);
    expect(f.citations).toBeGreaterThan(0);
    expect(f.artifacts).toBeGreaterThan(0);
  });

  it('when the window is loaded, then its rows are exactly the records the simulator serves for those days', async () => {
    const sim = await startSimulator({
      port: 0,
      ...demoDataset({ days: DAYS, recordsPerDay: RECORDS_PER_DAY, seed: SEED }),
    });
    try {
      const ids = new Set<string>();
      for (const day of sim.truth.days()) {
        if (day < summary.window.from || day > summary.window.to) continue;
        for (const r of sim.truth.exportDay(day)) ids.add(r['Message ID'].toLowerCase());
      }
      const stored = await w.pool.query<{ id: string }>(
        'select message_id::text as id from analytics_messages where _deleted_at is null',
      );
      expect(new Set(stored.rows.map((r) => r.id))).toEqual(ids);
      expect(summary.figures.rows).toBe(ids.size);
    } finally {
      await sim.close();
    }
  });

  it('when it prints BI results, then they are the views’ answers', async () => {
    const days = await w.pool.query(
      `select message_date::text as message_date, messages::int, active_users::int, active_threads::int,
              cancelled::int, round(avg_response_chars)::int as avg_response_chars
       from daily_usage order by messages desc, message_date desc limit 5`,
    );
    expect(summary.bi.topDays).toEqual(days.rows);
    expect(summary.bi.topDays.reduce((s, d) => s + d.messages, 0)).toBe(summary.figures.rows);
    const sources = await w.pool.query(
      'select citation_type, name, citations::int, threads::int from citation_sources order by citations desc, citation_type, name limit 5',
    );
    expect(summary.bi.topSources).toEqual(sources.rows);
    expect(summary.bi.health).toMatchObject({
      watermark: summary.window.to,
      lag_days: 0,
      complete_days: DAYS,
      failed_days: 0,
      last_run_status: 'succeeded',
    });
  });

  it('when it used a Temporal server it does not own, then it created the daily schedule and removed it at exit', async () => {
    expect(summary.schedule).toMatchObject({ id: 'crs-sync-daily', action: 'created', removedAtExit: true });
    expect(summary.schedule.nextRun).toMatch(/T00:30:00\.000Z$/);
    const c = await Connection.connect({ address: inject('temporalAddress') });
    try {
      await expect(
        c.workflowService.describeSchedule({ namespace, scheduleId: 'crs-sync-daily' }),
      ).rejects.toThrow(/not found/i);
    } finally {
      await c.close();
    }
  });

  it('when it runs, then no credential of the simulator appears in its output', async () => {
    const sim = await startSimulator({ port: 0, seed: SEED });
    try {
      for (const secret of [sim.credentials.clientSecret, sim.credentials.apiKey]) {
        expect(run.stdout).not.toContain(secret);
        expect(run.stderr).not.toContain(secret);
      }
    } finally {
      await sim.close();
    }
  });
});

describe('crs-sync demo --keep', () => {
  it('when --keep is given, then after the summary the worker keeps serving the schedule it created until Ctrl-C, and the demo exits 0', async () => {
    const url = inject('databaseUrl');
    const address = inject('temporalAddress');
    const schema = `demo_${randomBytes(4).toString('hex')}`;
    const namespace = `demo-${randomBytes(4).toString('hex')}`;
    await createNamespace(address, namespace);
    const w = openWarehouse({ url, schema, max: 2 });
    const { child, done } = runCli(
      ['demo', '--days', '2', '--records-per-day', '20', '--keep', '--temporal-address', address],
      { DATABASE_URL: url, CRS_SCHEMA: schema, TEMPORAL_NAMESPACE: namespace, LOG_LEVEL: 'warn' },
    );
    let stderr = '';
    child.stderr?.on('data', (b: Buffer) => {
      stderr += b.toString('utf8');
    });
    try {
      for (let i = 0; i < 1800 && !stderr.includes('until Ctrl-C') && child.exitCode === null; i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(stderr).toContain('until Ctrl-C');
      expect(stderr).toContain(`(schema ${schema})`);
      // A run of the schedule now: only a worker that is still up can carry it out.
      const c = await Connection.connect({ address });
      try {
        const client = new Client({ connection: c, namespace });
        await client.schedule.getHandle('crs-sync-daily').trigger();
      } finally {
        await c.close();
      }
      let scheduled = 0;
      for (let i = 0; i < 600 && scheduled === 0; i++) {
        const r = await w.pool.query(
          `select count(*)::int as n from sync_runs where kind = 'scheduled' and status = 'succeeded'`,
        );
        scheduled = r.rows[0].n;
        if (scheduled === 0) await new Promise((r) => setTimeout(r, 200));
      }
      expect(scheduled).toBe(1);
      child.kill('SIGINT');
      const r = await done;
      expect(r.code).toBe(0);
      expect(r.stderr).toMatch(/SIGINT, stopping everything the demo started/);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await dropSchema(w).catch(() => {});
      await w.close();
    }
  }, 300_000);
});

describe('crs-sync demo, stopped and misused', () => {
  it('when an option is out of range, then it exits 2 before starting anything', async () => {
    const r = await runCli(['demo', '--days', '0'], {}).done;
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--days/);
  });

  it('when Ctrl-C arrives during the backfill, then it stops the dev server and PostgreSQL it started and exits 1', async () => {
    const { child, done } = runCli(['demo', '--days', '30', '--records-per-day', '200'], {
      LOG_LEVEL: 'warn',
    });
    // Wait for the backfill to start, then note what the demo runs besides itself.
    let stderr = '';
    child.stderr?.on('data', (b: Buffer) => {
      stderr += b.toString('utf8');
    });
    for (let i = 0; i < 1200 && !/backfill {3}crs-sync-backfill/.test(stderr); i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(stderr).toMatch(/backfill {3}crs-sync-backfill/);
    const descendants = descendantsOf(child.pid!);
    const names = descendants.map((p) => p.command).join('\n');
    expect(names).toMatch(/temporal/);
    expect(names).toMatch(/postgres/);
    child.kill('SIGINT');
    const r = await done;
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/interrupted/);
    const alive = descendants.filter((p) => isAlive(p.pid));
    expect(alive).toEqual([]);
  }, 240_000);
});

function descendantsOf(pid: number): { pid: number; command: string }[] {
  const out = execFileSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' });
  const rows = out
    .split('\n')
    .map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ pid: Number(m[1]), ppid: Number(m[2]), command: m[3]! }));
  const found: { pid: number; command: string }[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift()!;
    for (const r of rows.filter((x) => x.ppid === p)) {
      found.push({ pid: r.pid, command: r.command });
      queue.push(r.pid);
    }
  }
  return found;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
