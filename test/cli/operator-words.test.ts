import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { WORKER_SETTING_NAMES } from '../../src/temporal/worker-settings.ts';
import { type FakeRecord, makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * What the commands tell an operator where they used to say nothing, or something that did not
 * add up: the real `crs-sync` process against the run's Postgres.
 */
const root = path.resolve(import.meta.dirname, '..', '..');
const bin = path.join(root, 'bin', 'crs-sync.js');

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment of a case: nothing of the test process's warehouse or service settings. */
function cleanEnv(env: Record<string, string | undefined>): Record<string, string | undefined> {
  const base: Record<string, string | undefined> = {
    ...process.env,
    LOG_LEVEL: 'warn',
    CRS_ENV_FILE: '/nonexistent',
  };
  for (const k of Object.keys(base)) if (k.startsWith('CRS_') && k !== 'CRS_ENV_FILE') delete base[k];
  delete base.DATABASE_URL;
  return { ...base, ...env };
}

function run(args: string[], env: Record<string, string | undefined> = {}, cwd?: string): Promise<Result> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { cwd: cwd ?? mkdtempSync(path.join(tmpdir(), 'crs-words-')), env: cleanEnv(env), timeout: 90_000 },
      (err, stdout, stderr) => {
        const code = err && typeof err.code === 'number' ? err.code : err ? null : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Starts a long-running command and waits for `ready` in its output (stdout or stderr). */
async function startUntil(
  args: string[],
  env: Record<string, string | undefined>,
  ready: (out: { stdout: string; stderr: string }) => boolean,
): Promise<{ child: ChildProcess; out: { stdout: string; stderr: string } }> {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: mkdtempSync(path.join(tmpdir(), 'crs-words-')),
    env: cleanEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  child.stdout?.on('data', (b: Buffer) => {
    out.stdout += b.toString('utf8');
  });
  child.stderr?.on('data', (b: Buffer) => {
    out.stderr += b.toString('utf8');
  });
  for (let i = 0; i < 1200 && !ready(out); i++) {
    if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}: ${out.stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, out };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}

describe('a command that only reads, where no warehouse is', () => {
  it.each([
    ['status', ['status']],
    ['rejects list', ['rejects', 'list']],
    ['rejects replay --dry-run', ['rejects', 'replay', '--dry-run']],
    ['deletes list', ['deletes', 'list']],
  ])(
    'when %s runs without DATABASE_URL from a directory with no embedded PostgreSQL, then it exits 2 naming where it looked and creates nothing',
    async (_name, args) => {
      const cwd = mkdtempSync(path.join(tmpdir(), 'crs-words-empty-'));
      const r = await run(args, {}, cwd);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('DATABASE_URL is not set');
      expect(r.stderr).not.toContain('using the embedded PostgreSQL');
      const looked = /no embedded PostgreSQL in (\S+) /.exec(r.stderr)?.[1];
      expect(looked, r.stderr).toBeDefined();
      expect(looked).toMatch(/postgres/);
      expect(r.stderr).toContain(cwd);
      expect(existsSync(looked!)).toBe(false);
      expect(readdirSync(cwd)).toEqual([]);
    },
  );
});

describe('help on every command', () => {
  it('when worker --help is read, then it lists every worker setting the worker reads, that settings are read at start, and that the alert thresholds are the stored ones instead', async () => {
    const r = await run(['worker', '--help']);
    expect(r.code).toBe(0);
    for (const name of WORKER_SETTING_NAMES) expect(r.stdout, name).toContain(name);
    const help = r.stdout.replace(/\s+/g, ' ');
    // Before: "Every setting, the alerts' included, is read when the worker starts: restart the
    // workers after changing one", while a restart does not change a threshold the deployment
    // stored (test/alerts/deployment.test.ts: running checkers follow `alerts settings --store`).
    expect(help).not.toMatch(/the alerts' included/);
    expect(help).toContain('The worker reads its settings when it starts: restart it after changing one.');
    expect(help).toContain(
      'The exception is the alert thresholds (CRS_FRESHNESS_SLA, CRS_ALERT_QUARANTINE_SHARE, CRS_ALERT_BUDGET_WAIT)',
    );
    expect(help).toContain(
      "every check judges by the deployment's stored ones, which `crs-sync alerts settings --store` changes for every worker from its next check, without a restart",
    );
  });

  it('when dashboard --help is read, then its example for the network names CRS_DASHBOARD_ALLOWED_HOSTS', async () => {
    const r = await run(['dashboard', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/CRS_DASHBOARD_ALLOWED_HOSTS=\S+/);
    expect(r.stdout).toContain('--host 0.0.0.0');
  });

  it("when the README's settings table is read, then it has CRS_ENV_FILE, the file every command reads first, with the simulator's --env-out that writes one", () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    const row = readme.split('\n').find((l) => l.startsWith('| `CRS_ENV_FILE` |'));
    expect(row, 'a row for CRS_ENV_FILE').toBeDefined();
    expect(row).toContain('`.env`');
    expect(row).toContain('--env-out');
  });
});

describe('the warehouse commands say what they did', () => {
  let tw: TestWarehouse;
  let env: Record<string, string>;
  let dir: string;
  let files = 0;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'twords' });
    env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema };
    dir = mkdtempSync(path.join(tmpdir(), 'crs-words-data-'));
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  const fileOf = (lines: (FakeRecord | string)[]) => {
    const file = path.join(dir, `f${++files}.jsonl`);
    writeFileSync(file, toJsonl(lines));
    return file;
  };
  const rejectsJson = async (...args: string[]) => {
    const r = await run(['rejects', 'list', '--json', ...args], env);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout
      .split('\n')
      .filter(Boolean)
      .map(
        (l) =>
          JSON.parse(l) as {
            id: string;
            raw: string;
            replay_result: string | null;
            resolution: string | null;
          },
      );
  };

  it('when an import of a complete day holds its deletes, then its summary and its JSON count them and say how to review them', async () => {
    const day = '2026-09-01';
    const recs = makeRecords(100, { day, seed: 'held' });
    expect((await run(['import', fileOf(recs), '--no-progress'], env)).code).toBe(0);
    const partial = fileOf(recs.slice(0, 40));
    const r = await run(['import', partial, '--no-progress', '--from', day, '--to', day], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/marked deleted\s+0/);
    expect(r.stdout).toMatch(/deletes held for review\s+60/);
    expect(r.stdout).toContain('crs-sync deletes list');
    const j = await run(
      ['import', partial, '--no-progress', '--from', day, '--to', day, '--json', '--load-id', 'held-again'],
      env,
    );
    const s = JSON.parse(j.stdout);
    expect(s.held).toBe(60);
    expect(s.hint).toContain('crs-sync deletes list');
  });

  it('when rejects replay --dry-run runs, then it says what a replay would load and what would stay rejected, by code, and writes nothing', async () => {
    const day = '2026-09-02';
    const recs: (FakeRecord | string)[] = makeRecords(5, { day, seed: 'dry' });
    const drifted = { ...makeRecords(1, { day, seed: 'dry-new' })[0]!, 'Brand New Field': 'x' };
    recs.push(drifted, '{"not": json');
    const imp = await run(['import', fileOf(recs), '--no-progress', '--load-id', 'dry-1'], {
      ...env,
      CRS_RECORD_CONTRACT: 'freeze',
    });
    expect(imp.stdout).toMatch(/rejected\s+2/);

    const evolve = await run(['rejects', 'replay', '--dry-run', '--load-id', 'dry-1'], env);
    expect(evolve.code, evolve.stderr).toBe(0);
    expect(evolve.stdout).toContain('dry run: nothing written');
    expect(evolve.stdout).toMatch(/selected\s+2/);
    expect(evolve.stdout).toMatch(/would load\s+1/);
    expect(evolve.stdout).toMatch(/would stay rejected\s+1/);
    expect(evolve.stdout).toMatch(/invalid_json\s+1/);

    const frozen = await run(['rejects', 'replay', '--dry-run', '--load-id', 'dry-1'], {
      ...env,
      CRS_RECORD_CONTRACT: 'freeze',
    });
    expect(frozen.stdout).toMatch(/would load\s+0/);
    expect(frozen.stdout).toMatch(/would stay rejected\s+2/);
    expect(frozen.stdout).toMatch(/schema_drift\s+1/);

    // Nothing was written: both still open, no replay run, the drifted row not loaded.
    expect(await rejectsJson('--load-id', 'dry-1')).toHaveLength(2);
    const replays = await tw.w.pool.query("select 1 from sync_runs where kind = 'replay'");
    expect(replays.rowCount).toBe(0);
    const row = await tw.w.pool.query('select 1 from analytics_messages where message_id = $1', [
      drifted['Message ID'],
    ]);
    expect(row.rowCount).toBe(0);
  });

  it('when a reject is dismissed with a reason, then it leaves the open ones, rejects list --all shows the reason and status counts it closed', async () => {
    const [bad] = (await rejectsJson('--load-id', 'dry-1', '--code', 'invalid_json')).map((r) => r.id);
    const r = await run(
      ['rejects', 'dismiss', '--id', String(bad), '--reason', 'a test client wrote it'],
      env,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`dismissed 1 reject(s): ${bad}`);
    expect((await rejectsJson('--load-id', 'dry-1')).map((x) => x.id)).not.toContain(bad);
    const all = await run(['rejects', 'list', '--all', '--load-id', 'dry-1'], env);
    expect(all.stdout).toContain('dismissed: a test client wrote it');
    const status = JSON.parse((await run(['status', '--json'], env)).stdout);
    expect(status.rejects).toContainEqual({
      source: 'file',
      errorCode: 'invalid_json',
      open: 0,
      replayed: 0,
      closed: 1,
    });

    const again = await run(['rejects', 'dismiss', '--id', String(bad), '--reason', 'twice'], env);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain(`already closed, left as they were: ${bad}`);
    const unknown = await run(['rejects', 'dismiss', '--id', '99999999', '--reason', 'none'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no reject has the id(s) 99999999');
    expect((await run(['rejects', 'dismiss', '--id', String(bad)], env)).code).toBe(2);
  });

  it('when a complete load of a day no longer holds a quarantined line, then its reject is closed, and one the day still holds stays open', async () => {
    const day = '2026-09-03';
    const recs = makeRecords(30, { day, seed: 'gone' });
    // Both rejected for a bad user id, each with a readable message id and day.
    const fixedLater = { ...recs[0]!, 'User ID': 'not-a-user' };
    const badForGood = { ...recs[1]!, 'Thread ID': 'not-a-thread' };
    const first = [fixedLater, badForGood, ...recs.slice(2)];
    expect(
      (await run(['import', fileOf(first), '--no-progress', '--from', day, '--to', day], env)).code,
    ).toBe(0);
    const openBefore = (await rejectsJson('--code', 'invalid_uuid')).filter((r) => r.raw.includes(day));
    expect(openBefore).toHaveLength(2);

    // The service corrected the first line; the second is still bad.
    const second = [recs[0]!, badForGood, ...recs.slice(2)];
    const r = await run(['import', fileOf(second), '--no-progress', '--from', day, '--to', day], env);
    expect(r.code, r.stderr).toBe(0);
    const open = (await rejectsJson('--code', 'invalid_uuid')).filter((x) => x.raw.includes(day));
    expect(open.length).toBeGreaterThan(0);
    expect(open.every((x) => x.raw === JSON.stringify(badForGood))).toBe(true);
    const gone = (await rejectsJson('--all', '--code', 'invalid_uuid')).find(
      (x) => x.raw === JSON.stringify(fixedLater),
    );
    expect(gone?.resolution).toBe('gone');
    expect(gone?.replay_result).toMatch(/^closed: not quarantined again by the complete load/);
  });

  it('when a worker has leased from the shared request budget, then status shows the limit it was set to and its use', async () => {
    // What a worker with CRS_RATE_LIMIT_RPS=20 leases: 20 per 1 s plus its 75 ms hold (before,
    // status showed that as 18.6 requests/s). A second budget's window is long enough for its
    // count to be read: 120 per minute plus the hold, 3 leased.
    await tw.w.pool.query(`select * from rate_budget_lease('crs', 20, 1075, 1, false)`);
    await tw.w.pool.query(`select * from rate_budget_lease('slow', 120, 60075, 3, false)`);
    const r = await run(['status'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /budget\s+crs: limit 20 requests\/s, \d+ leased in the last 1\.075 s, .*; slow: limit 2 requests\/s, 3 leased in the last 60\.075 s/,
    );
    const j = JSON.parse((await run(['status', '--json'], env)).stdout);
    expect(j.budgets).toEqual([
      expect.objectContaining({ name: 'crs', limitPerSecond: 20, windowMs: 1075, pausedSeconds: 0 }),
      expect.objectContaining({ name: 'slow', limitPerSecond: 2, leasedInWindow: 3, pausedSeconds: 0 }),
    ]);
  });

  it('when the dashboard is bound to every address with a token, then its banner names the address bound and the allowed-hosts setting', async () => {
    const { child, out } = await startUntil(
      ['dashboard', '--host', '0.0.0.0', '--port', '0'],
      { ...env, CRS_DASHBOARD_TOKEN: 'a-token-of-enough-length-1234' },
      (o) => o.stdout.includes('\n'),
    );
    try {
      const line = out.stdout.split('\n')[0]!;
      expect(line).toMatch(
        /^crs-sync dashboard: listening on 0\.0\.0\.0:\d+ \(every address of this machine/,
      );
      expect(line).toContain('CRS_DASHBOARD_ALLOWED_HOSTS');
      expect(line).toContain('CRS_DASHBOARD_TOKEN');
      expect(line).not.toContain('a-token-of-enough-length-1234');
    } finally {
      await stop(child);
    }
  });

  it('when the dashboard runs on loopback with CRS_DASHBOARD_TOKEN set (a .env written for Compose), then its banner says every page needs the token, as the dashboard does', async () => {
    const token = 'a-token-of-enough-length-5678';
    const { child, out } = await startUntil(
      ['dashboard', '--port', '0'],
      { ...env, CRS_DASHBOARD_TOKEN: token },
      (o) => o.stdout.includes('\n'),
    );
    try {
      const line = out.stdout.split('\n')[0]!;
      // Before, on loopback the banner said nothing of the token, and every page answered 401.
      expect(line).toMatch(/^crs-sync dashboard: http:\/\/127\.0\.0\.1:\d+\/ \(warehouse /);
      expect(line).toContain('every request but /healthz needs CRS_DASHBOARD_TOKEN');
      expect(line).not.toContain(token);
      expect(line).not.toContain('CRS_DASHBOARD_ALLOWED_HOSTS');
      const url = /http:\/\/127\.0\.0\.1:\d+/.exec(line)![0];
      expect((await fetch(`${url}/health`)).status).toBe(401);
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      const withToken = await fetch(`${url}/health`, { headers: { authorization: `Bearer ${token}` } });
      expect(withToken.status).toBe(200);
    } finally {
      await stop(child);
    }
  });

  it('when the dashboard runs on loopback without a token, then its banner names no token', async () => {
    const { child, out } = await startUntil(['dashboard', '--port', '0'], env, (o) =>
      o.stdout.includes('\n'),
    );
    try {
      const line = out.stdout.split('\n')[0]!;
      expect(line).toMatch(
        /^crs-sync dashboard: http:\/\/127\.0\.0\.1:\d+\/ \(warehouse .*\); Ctrl-C stops it$/,
      );
      expect(line).not.toContain('CRS_DASHBOARD_TOKEN');
      expect((await fetch(`${/http:\/\/127\.0\.0\.1:\d+/.exec(line)![0]}/health`)).status).toBe(200);
    } finally {
      await stop(child);
    }
  });

  it('when a worker starts with alert receivers, then its start-up log names each by scheme and host, never its path, and says which alert settings a restart changes', async () => {
    const secret = 'T0000/B0000/s3cr3t-path-of-the-hook';
    const { child, out } = await startUntil(
      ['worker'],
      {
        ...env,
        LOG_LEVEL: 'info',
        CRS_BASE_URL: 'http://127.0.0.1:1',
        CRS_SERVICE_ACCOUNT_TOKEN: 'x.y.z',
        CRS_ACCESS_TOKEN: 'not-used-here-123',
        CRS_METRICS_PORT: '0',
        CRS_ALERT_WEBHOOK_URL: `https://hooks.example.invalid/services/${secret},http://127.0.0.1:9/alert-${secret}`,
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        TEMPORAL_TASK_QUEUE: `words-worker-${process.pid}`,
        TEMPORAL_SHUTDOWN_GRACE: '1s',
      },
      (o) => o.stderr.includes('"worker started"'),
    );
    await stop(child);
    const started = out.stderr.split('\n').find((l) => l.includes('"worker started"'));
    expect(started, out.stderr).toBeDefined();
    const log = JSON.parse(started!);
    expect(log.alertReceivers).toEqual(['https://hooks.example.invalid/…', 'http://127.0.0.1:9/…']);
    // Only what a restart changes is said to need one; the thresholds are the stored ones.
    expect(log.alertSettings).toMatch(
      /^receivers, CRS_ALERT_CHECK_INTERVAL and CRS_ALERT_TIMEOUT read at start/,
    );
    expect(log.alertSettings).toMatch(
      /thresholds \(CRS_FRESHNESS_SLA, CRS_ALERT_QUARANTINE_SHARE, CRS_ALERT_BUDGET_WAIT\) are the deployment's stored ones: crs-sync alerts settings --store/,
    );
    expect(out.stderr).not.toContain('s3cr3t');
  });
});
