import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Dashboard, startDashboard } from '../../src/dashboard/server.ts';
import { openWarehouse } from '../../src/warehouse/db.ts';
import { type LoadedWarehouse, loadWarehouse } from './fixture.ts';

/**
 * The dashboard against what a browser on a hostile page, or a careless address, sends it: over
 * real HTTP, against a warehouse loaded from the simulator (fixture.ts) in the run's PostgreSQL.
 * Where a request must be held in the warehouse, the test takes a table lock on a connection of
 * its own, and watches the dashboard's backends through pg_stat_activity.
 */

const SEED = 2011;
const root = path.resolve(import.meta.dirname, '..', '..');

let lw: LoadedWarehouse;
let dash: Dashboard;
let port: number;
let all: { from: string; to: string };

beforeAll(async () => {
  lw = await loadWarehouse(SEED);
  dash = await startDashboard({ pool: lw.tw.w.pool, port: 0, statementTimeoutMs: 60_000 });
  port = Number(new URL(dash.url).port);
  all = { from: lw.days[0] as string, to: lw.days[lw.days.length - 1] as string };
}, 180_000);

afterAll(async () => {
  await dash?.close();
  await lw?.dispose();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A request as a browser (or anyone) may send it: any Host, any path, any header. */
function request(
  target: string,
  opts: { method?: string; headers?: Record<string, string>; port?: number } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: opts.port ?? port,
        path: target,
        method: opts.method ?? 'GET',
        headers: opts.headers,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  return (await lw.tw.w.pool.query(text, params)).rows as T[];
}

/** The chart data a page hands its script. */
function charts(
  html: string,
): Record<string, { days: string[]; series: { label: string; values: unknown[] }[] }> {
  const m = /<script type="application\/json" id="chart-data">([\s\S]*?)<\/script>/.exec(html);
  return JSON.parse(m?.[1] ?? 'null');
}

/** Backends of the warehouse waiting for a lock that `holder` has. */
async function blockedBy(holder: number): Promise<number[]> {
  const rows = await sql<{ pid: number }>(
    'select pid from pg_stat_activity where $1 = any(pg_blocking_pids(pid))',
    [holder],
  );
  return rows.map((r) => r.pid);
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, tries = 300): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = await probe();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`gave up waiting: ${what}`);
}

/** A connection of the test's own holding `lock table … in access exclusive mode` until released. */
async function lockTable(table: string): Promise<{ pid: number; release(): Promise<void> }> {
  const c: pg.PoolClient = await lw.tw.w.pool.connect();
  await c.query('begin');
  await c.query(`lock table ${table} in access exclusive mode`);
  const { rows } = await c.query<{ pid: number }>('select pg_backend_pid() as pid');
  return {
    pid: rows[0]?.pid as number,
    release: async () => {
      await c.query('rollback');
      c.release();
    },
  };
}

describe('the dashboard against other origins', () => {
  it('when a request names another host (a rebound DNS name), then it is refused with 421 and told where the dashboard answers', async () => {
    const r = await request('/api/usage', { headers: { host: `attacker.example:${port}` } });
    expect(r.status).toBe(421);
    expect(r.body).toContain(`this dashboard answers at http://127.0.0.1:${port} only`);
    expect(r.body).toContain('CRS_DASHBOARD_ALLOWED_HOSTS');
    expect(r.body).not.toContain('userId');
    // Its own names on loopback are served.
    expect((await request('/api/health', { headers: { host: `127.0.0.1:${port}` } })).status).toBe(200);
    expect((await request('/api/health', { headers: { host: `localhost:${port}` } })).status).toBe(200);
  });

  it('when a page of another origin sends a request, then it is refused with 403, whatever the method', async () => {
    const host = `127.0.0.1:${port}`;
    const post = await request('/usage', {
      method: 'POST',
      headers: { host, origin: 'http://attacker.example' },
    });
    expect(post.status).toBe(403);
    expect(post.body).toContain('a request from the origin "http://attacker.example" is refused');
    const get = await request('/api/users', { headers: { host, origin: 'http://attacker.example' } });
    expect(get.status).toBe(403);
    expect((await request('/api/users', { headers: { host, origin: `http://${host}` } })).status).toBe(200);
  });

  it('when a name is in CRS_DASHBOARD_ALLOWED_HOSTS, then a request for it is served and others still refused', async () => {
    const d = await startDashboard({
      pool: lw.tw.w.pool,
      port: 0,
      allowedHosts: ['dash.internal', 'proxy:9000'],
    });
    try {
      const p = Number(new URL(d.url).port);
      expect(
        (await request('/api/health', { port: p, headers: { host: `dash.internal:${p}` } })).status,
      ).toBe(200);
      expect((await request('/api/health', { port: p, headers: { host: 'proxy:9000' } })).status).toBe(200);
      expect((await request('/api/health', { port: p, headers: { host: 'dash.internal:1' } })).status).toBe(
        421,
      );
    } finally {
      await d.close();
    }
  });

  it('when a page is served, then no other page may frame it', async () => {
    const r = await request(`/usage?from=${all.from}&to=${all.to}`, {
      headers: { host: `127.0.0.1:${port}` },
    });
    expect(r.status).toBe(200);
    expect(r.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(r.headers['content-security-policy']).toContain("default-src 'self'");
    expect(r.headers['x-frame-options']).toBe('DENY');
  });
});

describe('the dashboard against absurd ranges and addresses', () => {
  it('when the range runs to 9999-12-31, then the charts cover all of it while the queries read only the days with data', async () => {
    const asked = { from: all.from, to: '9999-12-31' };
    const page = await fetch(`${dash.url}/usage?from=${asked.from}&to=${asked.to}`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).not.toContain('data-error');
    const c = charts(html);
    const days = c.messages?.days ?? [];
    // The whole range, to its last day; every day with data, and the empty rest as its ends.
    expect(days[0]).toBe(asked.from);
    expect(days[days.length - 1]).toBe('9999-12-31');
    const [t] = await sql<{ n: number }>(
      'select count(*)::int as n from analytics_messages where _deleted_at is null and message_date >= $1',
      [asked.from],
    );
    const values = (c.messages?.series[0]?.values ?? []) as number[];
    expect(values.reduce((s, v) => s + v, 0)).toBe(t?.n);
    expect(values[values.length - 1]).toBe(0);

    const api = (await (await fetch(`${dash.url}/api/usage?from=${asked.from}&to=${asked.to}`)).json()) as {
      range: unknown;
      dataRange: { from: string; to: string };
    };
    expect(api.range).toEqual(asked);
    // What the per-day queries read: the days of the data, not the 2.9 million asked for.
    expect(api.dataRange.from).toBe(asked.from);
    expect(api.dataRange.to < '2100-01-01').toBe(true);
    // The chart's points: the days read, and the empty rest's two ends.
    const read = (Date.parse(api.dataRange.to) - Date.parse(api.dataRange.from)) / 86_400_000 + 1;
    expect(read).toBeLessThan(60);
    expect(days.length).toBeLessThanOrEqual(read + 2);
  });

  it('when every page is asked for 0001-01-01 … 9999-12-31, then each answers 200 with every section, its queries cut to the data', async () => {
    for (const name of ['usage', 'users', 'threads', 'citations']) {
      const r = await fetch(`${dash.url}/api/${name}?from=0001-01-01&to=9999-12-31`);
      expect(r.status, name).toBe(200);
      const body = (await r.json()) as {
        dataRange: { from: string; to: string };
        sections: Record<string, { ok: boolean; error?: string }>;
      };
      expect(
        Object.values(body.sections).filter((s) => !s.ok),
        name,
      ).toEqual([]);
      expect(body.dataRange.from > '2000-01-01' && body.dataRange.to < '2100-01-01', name).toBe(true);
    }
    const html = await (await fetch(`${dash.url}/users?from=0001-01-01&to=9999-12-31`)).text();
    const days = charts(html).users?.days ?? [];
    expect([days[0], days[days.length - 1]]).toEqual(['0001-01-01', '9999-12-31']);
  });

  it('when a range or an address is malformed, then the answer is 400 and says what is wrong', async () => {
    const cases: [string, string][] = [
      ['/usage?from=0000-01-01&to=2026-01-01', 'from="0000-01-01" is before 0001-01-01'],
      ['/usage?from=9999-12-31', 'from=9999-12-31 alone means the 30 days from it, which go past 9999-12-31'],
      ['/usage?from=2026-02-30&to=2026-03-01', 'from="2026-02-30" is not a day in the form YYYY-MM-DD'],
      ['/usage?from=2026-03-02&to=2026-03-01', 'from (2026-03-02) is after to (2026-03-01)'],
      ['/usage?from=%E0%A4%A&to=2026-03-01', 'malformed percent-encoding'],
      ['/usage?form=2026-03-01', 'unknown parameter "form"'],
      ['/usage?from=2026-03-01&from=2026-03-02', 'from is given more than once'],
      ['//', 'is not a URL path'],
    ];
    for (const [target, message] of cases) {
      for (const t of new Set([target, target.replace(/^\/usage/, '/api/usage')])) {
        const r = await request(t, { headers: { host: `127.0.0.1:${port}` } });
        expect([t, r.status]).toEqual([t, 400]);
        const text = t.startsWith('/api/')
          ? (JSON.parse(r.body) as { error: string }).error
          : r.body.replace(/&quot;/g, '"').replace(/&#39;/g, "'");
        expect(text, t).toContain(message);
      }
    }
  });
});

describe('the dashboard under load and while the rollups are rebuilt', () => {
  it('when the client goes away, then its query is cancelled in the warehouse and the connection serves the next request', async () => {
    const lock = await lockTable('rollup_daily');
    try {
      const gone = new AbortController();
      const pending = fetch(`${dash.url}/api/usage?from=${all.from}&to=${all.to}`, {
        signal: gone.signal,
      }).catch(() => 'aborted');
      const [pid] = await until('the dashboard query waits for the lock', async () => {
        const b = await blockedBy(lock.pid);
        return b.length > 0 && b;
      });
      gone.abort();
      expect(await pending).toBe('aborted');
      // Cancelled while the lock is still held: it did not wait for it.
      await until('the query is gone', async () => {
        const [row] = await sql<{ state: string | null }>(
          'select state from pg_stat_activity where pid = $1',
          [pid],
        );
        return (row === undefined || row.state !== 'active') && true;
      });
      expect(await blockedBy(lock.pid)).toEqual([]);
    } finally {
      await lock.release();
    }
    const next = await fetch(`${dash.url}/api/usage?from=${all.from}&to=${all.to}`);
    expect(next.status).toBe(200);
  });

  it('when every connection is taken by slow pages, then the next page answers 503 busy with Retry-After and /api/health still answers 200', async () => {
    const pool = openWarehouse({ url: lw.tw.url, schema: lw.tw.schema, max: 3 }).pool;
    const d = await startDashboard({ pool, port: 0, statementTimeoutMs: 60_000 });
    // The usage page's totals read it; the health page does not.
    const lock = await lockTable('rollup_user_daily');
    const slow: Promise<unknown>[] = [];
    try {
      for (let i = 1; i <= 2; i++) {
        slow.push(fetch(`${d.url}/api/usage?from=${all.from}&to=${all.to}`).then((r) => r.status));
        await until(`${i} page(s) wait`, async () => (await blockedBy(lock.pid)).length === i);
      }
      const third = fetch(`${d.url}/api/usage?from=${all.from}&to=${all.to}`);
      const first = await Promise.race([
        third,
        until('a third page waits as well', async () => (await blockedBy(lock.pid)).length === 3).then(
          () => 'it took a connection and waits',
        ),
      ]);
      expect(first).toBeInstanceOf(Response);
      const busy = first as Response;
      expect(busy.status).toBe(503);
      expect(busy.headers.get('retry-after')).toBe('5');
      expect(((await busy.json()) as { error: string }).error).toMatch(
        /^busy: the dashboard's connections to the warehouse .* are all in use/,
      );
      const health = await fetch(`${d.url}/api/health`);
      expect(health.status).toBe(200);
      expect(((await health.json()) as { sections: { health: { ok: boolean } } }).sections.health.ok).toBe(
        true,
      );
    } finally {
      await lock.release();
      await Promise.allSettled(slow);
      await d.close();
      await pool.end();
    }
    // The slow pages finish once the lock goes.
    expect(await Promise.all(slow)).toEqual([200, 200]);
  });

  it('when `crs-sync rollups rebuild` is held in its build step, then a page still answers, with the figures it had', async () => {
    const q = `from=${all.from}&to=${all.to}`;
    const before = (await (await fetch(`${dash.url}/api/usage?${q}`)).json()) as { sections: unknown };
    // Short statements: a reader that waits for the rebuild fails its sections instead of hanging.
    const d = await startDashboard({ pool: lw.tw.w.pool, port: 0, statementTimeoutMs: 3_000 });
    // The rebuild reads the history while it builds; the pages of the usage do not.
    const lock = await lockTable('thread_messages');
    let child: ChildProcess | undefined;
    try {
      child = spawn(process.execPath, [path.join(root, 'bin', 'crs-sync.js'), 'rollups', 'rebuild'], {
        cwd: root,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '/tmp',
          CRS_ENV_FILE: '/nonexistent',
          DATABASE_URL: lw.tw.url,
          CRS_SCHEMA: lw.tw.schema,
          LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      await until(
        'the rebuild waits in its build step',
        async () => (await blockedBy(lock.pid)).length > 0,
        600,
      );
      const during = await fetch(`${d.url}/api/usage?${q}`);
      expect(during.status).toBe(200);
      expect(((await during.json()) as { sections: unknown }).sections).toEqual(before.sections);
    } finally {
      await lock.release();
      if (child && child.exitCode === null) await once(child, 'exit');
      await d.close();
    }
    expect(child?.exitCode).toBe(0);
    const after = (await (await fetch(`${dash.url}/api/usage?${q}`)).json()) as { sections: unknown };
    expect(after.sections).toEqual(before.sections);
  });
});
