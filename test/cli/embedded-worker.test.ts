import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { openDemoWarehouse } from '../../src/demo/warehouse.ts';

/**
 * The embedded PostgreSQL as its two users meet it: a worker someone starts on purpose without
 * DATABASE_URL (its data kept in .data/postgres, so it must survive a crash), and the demo's
 * throw-away cluster. Each starts a real server (seconds), from a directory the user `postgres`
 * can reach when the tests run as root.
 */
const root = path.resolve(import.meta.dirname, '..', '..');
const bin = path.join(root, 'bin', 'crs-sync.js');

async function showFsync(url: string): Promise<string | undefined> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<{ fsync: string }>('show fsync')).rows[0]?.fsync;
  } finally {
    await c.end();
  }
}

describe('the embedded PostgreSQL', () => {
  const dirs: string[] = [];
  let worker: ChildProcess | undefined;
  afterAll(() => {
    if (worker && worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("when a worker is started with --allow-embedded and no DATABASE_URL, then it starts, says in one line where the data lives, and its cluster keeps fsync on (the demo's throw-away one has it off)", async () => {
    const cwd = mkdtempSync(path.join(tmpdir(), 'crs-embedded-worker-'));
    chmodSync(cwd, 0o755);
    dirs.push(cwd);
    const env: Record<string, string | undefined> = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith('CRS_') || k === 'DATABASE_URL') delete env[k];
    worker = spawn(process.execPath, [bin, 'worker', '--allow-embedded'], {
      cwd,
      env: {
        ...env,
        CRS_ENV_FILE: '/nonexistent',
        CRS_BASE_URL: 'http://127.0.0.1:1',
        CRS_SERVICE_ACCOUNT_TOKEN: 'x.y.z',
        CRS_ACCESS_TOKEN: 'not-used-here-123',
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        TEMPORAL_TASK_QUEUE: `embedded-worker-${process.pid}`,
        TEMPORAL_SHUTDOWN_GRACE: '1s',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    worker.stderr?.on('data', (b: Buffer) => {
      stderr += b.toString('utf8');
    });
    const exited = once(worker, 'exit');
    for (let i = 0; i < 1200 && !stderr.includes('"worker started"'); i++) {
      if (worker.exitCode !== null) throw new Error(`the worker exited ${worker.exitCode}: ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(stderr).toContain('"worker started"');
    const fallback = stderr.split('\n').filter((l) => l.includes('using the embedded PostgreSQL'));
    expect(fallback).toEqual([
      'crs-sync: DATABASE_URL is not set: using the embedded PostgreSQL, data in .data/postgres',
    ]);
    const port = /embedded PostgreSQL in \S+, 127\.0\.0\.1:(\d+)/.exec(stderr)?.[1];
    expect(port).toBeDefined();
    expect(await showFsync(`postgres://crs:crs-embedded@127.0.0.1:${port}/crs`)).toBe('on');
    worker.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);

    // The demo's cluster is deleted when the demo ends: nothing in it needs to survive a crash.
    const demo = await openDemoWarehouse({ databaseUrl: undefined, schema: 'crs', connections: 2 });
    try {
      expect(demo.embedded).toBe(true);
      const r = await demo.warehouse.pool.query<{ fsync: string }>('show fsync');
      expect(r.rows[0]?.fsync).toBe('off');
    } finally {
      await demo.close();
    }
  });
});
