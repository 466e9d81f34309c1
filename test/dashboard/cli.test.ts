import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/** `crs-sync dashboard` as a user runs it: the real CLI in a child process. */

const root = path.resolve(import.meta.dirname, '..', '..');
const cli = path.join(root, 'bin', 'crs-sync.js');

function start(
  args: string[],
  env: Record<string, string>,
): { child: ChildProcess; out: () => string; err: () => string } {
  const child = spawn(process.execPath, [cli, ...args], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      CRS_ENV_FILE: '/nonexistent',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (b: Buffer) => {
    out += b.toString('utf8');
  });
  child.stderr?.on('data', (b: Buffer) => {
    err += b.toString('utf8');
  });
  return { child, out: () => out, err: () => err };
}

async function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const [code] = await once(child, 'exit');
  return code as number | null;
}

let tw: TestWarehouse;
beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'dashcli' });
});
afterAll(async () => {
  await tw?.dispose();
});

describe('crs-sync dashboard', () => {
  it('when asked for help, then it explains the pages, the date range in the address, read-only and the options', async () => {
    const p = start(['dashboard', '--help'], {});
    expect(await exited(p.child)).toBe(0);
    const help = p.out();
    for (const s of [
      '--port <P>',
      '--host <H>',
      '?from=YYYY-MM-DD&to=YYYY-MM-DD',
      'read-only',
      'sync health',
      '/api/',
    ]) {
      expect(help).toContain(s);
    }
  });

  it('when started on a free port, then it prints its address, serves the pages, and stops with status 0 on SIGTERM', async () => {
    const p = start(['dashboard', '--port', '0'], {
      DATABASE_URL: tw.url,
      CRS_SCHEMA: tw.schema,
      LOG_LEVEL: 'warn',
    });
    try {
      for (let i = 0; i < 200 && !/http:\/\/\S+/.test(p.out()); i++) {
        if (p.child.exitCode !== null)
          throw new Error(`the dashboard exited ${p.child.exitCode}: ${p.err()}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const url = /(http:\/\/127\.0\.0\.1:\d+)\//.exec(p.out())?.[1];
      expect(url, p.out() + p.err()).toBeDefined();
      expect(p.out()).toContain(`schema ${tw.schema}`);
      const usage = await fetch(`${url}/usage?from=2026-11-01&to=2026-11-02`);
      expect(usage.status).toBe(200);
      expect(await usage.text()).toContain('The warehouse has no rows between 2026-11-01 and 2026-11-02.');
      const health = await fetch(`${url}/api/health`);
      expect(health.status).toBe(200);
      expect(((await health.json()) as { sections: { health: { ok: boolean } } }).sections.health.ok).toBe(
        true,
      );
      const asset = await fetch(`${url}/assets/uPlot.iife.min.js`);
      expect(asset.status).toBe(200);
      expect((await asset.text()).length).toBeGreaterThan(10_000);
    } finally {
      p.child.kill('SIGTERM');
    }
    expect(await exited(p.child)).toBe(0);
  });

  it('when the port is not a number, then it exits 2 and says why', async () => {
    const p = start(['dashboard', '--port', 'abc'], { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema });
    expect(await exited(p.child)).toBe(2);
    expect(p.err()).toContain('--port must be an integer in 0..65535, got "abc"');
  });

  it('when bound beyond loopback without CRS_DASHBOARD_TOKEN, then it exits 2 and names the setting', async () => {
    const p = start(['dashboard', '--host', '0.0.0.0', '--port', '0'], {
      DATABASE_URL: tw.url,
      CRS_SCHEMA: tw.schema,
    });
    expect(await exited(p.child)).toBe(2);
    expect(p.err()).toContain('--host 0.0.0.0 opens the dashboard beyond this machine');
    expect(p.err()).toContain('set CRS_DASHBOARD_TOKEN');
    expect(p.out()).not.toContain('http://');
  });

  it('when bound to 0.0.0.0 with CRS_DASHBOARD_TOKEN, then a request without the token gets 401, with it 200, and the token is printed nowhere', async () => {
    const token = 'dash-Token-5f1c2a9e77d04b3c';
    const p = start(['dashboard', '--host', '0.0.0.0', '--port', '0'], {
      DATABASE_URL: tw.url,
      CRS_SCHEMA: tw.schema,
      CRS_DASHBOARD_TOKEN: token,
      LOG_LEVEL: 'debug',
    });
    try {
      for (let i = 0; i < 200 && !/http:\/\/\S+/.test(p.out()); i++) {
        if (p.child.exitCode !== null)
          throw new Error(`the dashboard exited ${p.child.exitCode}: ${p.err()}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const url = /(http:\/\/127\.0\.0\.1:\d+)\//.exec(p.out())?.[1];
      expect(url, p.out() + p.err()).toBeDefined();
      const without = await fetch(`${url}/api/health`);
      expect(without.status).toBe(401);
      expect(without.headers.get('www-authenticate')).toContain('Basic realm="crs-sync dashboard"');
      expect(await without.text()).toContain('this dashboard needs CRS_DASHBOARD_TOKEN');
      const wrong = await fetch(`${url}/api/health`, { headers: { authorization: `Bearer ${token}x` } });
      expect(wrong.status).toBe(401);
      const bearer = await fetch(`${url}/api/health`, { headers: { authorization: `Bearer ${token}` } });
      expect(bearer.status).toBe(200);
      const basic = await fetch(`${url}/usage`, {
        headers: { authorization: `Basic ${Buffer.from(`anyone:${token}`).toString('base64')}` },
      });
      expect(basic.status).toBe(200);
      // The container's health check has no token: /healthz tells only that the server is up.
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
    } finally {
      p.child.kill('SIGTERM');
    }
    expect(await exited(p.child)).toBe(0);
    expect(p.out() + p.err()).not.toContain(token);
  });

  it('when CRS_DASHBOARD_STATEMENT_TIMEOUT_MS is set, then a query past it is stopped and its part of the page says so; a bad value exits 2', async () => {
    const bad = start(['dashboard', '--port', '0'], {
      DATABASE_URL: tw.url,
      CRS_SCHEMA: tw.schema,
      CRS_DASHBOARD_STATEMENT_TIMEOUT_MS: 'soon',
    });
    expect(await exited(bad.child)).toBe(2);
    expect(bad.err()).toContain(
      'CRS_DASHBOARD_STATEMENT_TIMEOUT_MS: must be a whole number from 100 to 3600000, in decimal digits only',
    );

    const p = start(['dashboard', '--port', '0'], {
      DATABASE_URL: tw.url,
      CRS_SCHEMA: tw.schema,
      CRS_DASHBOARD_STATEMENT_TIMEOUT_MS: '300',
      LOG_LEVEL: 'error',
    });
    // A lock the usage page's queries wait for, held by the test until the page has answered.
    const locker = await tw.w.pool.connect();
    try {
      await locker.query('begin');
      await locker.query('lock table rollup_daily in access exclusive mode');
      for (let i = 0; i < 200 && !/http:\/\/\S+/.test(p.out()); i++) {
        if (p.child.exitCode !== null)
          throw new Error(`the dashboard exited ${p.child.exitCode}: ${p.err()}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const url = /(http:\/\/127\.0\.0\.1:\d+)\//.exec(p.out())?.[1];
      const r = await fetch(`${url}/api/usage?from=2026-11-01&to=2026-11-02`);
      expect(r.status).toBe(200);
      const body = (await r.json()) as { sections: Record<string, { ok: boolean; error?: string }> };
      const stopped = Object.values(body.sections).filter((x) => !x.ok);
      expect(stopped.length).toBeGreaterThan(0);
      for (const x of stopped) expect(x.error).toContain('the query was stopped by the warehouse');
    } finally {
      await locker.query('rollback');
      locker.release();
      p.child.kill('SIGTERM');
    }
    expect(await exited(p.child)).toBe(0);
  });
});
