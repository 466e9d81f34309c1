import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AlertPayload } from '../../src/alerts/message.ts';
import { type AlertSettings, runAlertPass, startAlertMonitor } from '../../src/alerts/monitor.ts';
import { DELIVERY_CONCURRENCY } from '../../src/alerts/sender.ts';
import { MAX_ANSWER_BYTES } from '../../src/alerts/webhook.ts';
import { createLogger } from '../../src/log.ts';
import { rateBudgetOnPool } from '../../src/warehouse/rate-budget.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * What sending costs when receivers misbehave, over real HTTP on real PostgreSQL: a receiver that
 * answers with a huge body, receivers that hang while many incidents are open, a worker stopping
 * while they hang, and a webhook URL rotated with messages still undelivered. The incidents are
 * real conditions: pauses of the shared request budget (`budget_starved`, one per budget).
 */

const root = path.resolve(import.meta.dirname, '..', '..');
const silent = createLogger({ level: 'silent', pretty: false });
const MB = 1024 * 1024;

type Mode = 'ok' | 'hang' | '500';

/** A receiver per path prefix (`/a/…`, `/b/…`), each with its own mode, counting what it saw. */
class Receivers {
  server: Server;
  mode: Record<string, Mode> = {};
  taken: { receiver: string; payload: AlertPayload }[] = [];
  requests: Record<string, number> = {};
  open = 0;
  maxOpen = 0;
  private hung: ServerResponse[] = [];

  constructor() {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const receiver = req.url?.split('/')[1] ?? '';
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.requests[receiver] = (this.requests[receiver] ?? 0) + 1;
        const mode = this.mode[receiver] ?? 'ok';
        if (mode === 'hang') {
          this.open++;
          this.maxOpen = Math.max(this.maxOpen, this.open);
          this.hung.push(res);
          res.on('close', () => this.open--);
          return;
        }
        if (mode === '500') return void res.writeHead(500).end('broken');
        this.taken.push({ receiver, payload: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
        res.writeHead(200).end('ok');
      });
    });
  }
  async listen(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  /** Answers nothing to the hung requests: cuts them. */
  release(): void {
    for (const r of this.hung.splice(0)) r.destroy();
  }
  reset(): void {
    this.release();
    this.mode = {};
    this.taken = [];
    this.requests = {};
    this.maxOpen = 0;
  }
  async close(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

describe('alert delivery with receivers that misbehave', () => {
  const rx = new Receivers();
  let base: string;
  const warehouses: TestWarehouse[] = [];

  beforeAll(async () => {
    base = await rx.listen();
  });
  afterEach(() => rx.reset());
  afterAll(async () => {
    await rx.close();
    for (const tw of warehouses) await tw.dispose();
  });

  const warehouse = async () => {
    const tw = await createTestWarehouse({ prefix: 'alertsend' });
    warehouses.push(tw);
    return tw;
  };
  const settings = (o: Partial<AlertSettings> = {}): AlertSettings => ({
    freshnessSlaSeconds: 26 * 3600,
    quarantineShare: 0.05,
    budgetWaitMs: 300_000,
    urls: [`${base}/a/T000/B000/secret-path-a1`],
    timeoutMs: 1_000,
    checkIntervalMs: 60_000,
    ...o,
  });
  /** `n` incidents: the service paused `n` budgets for 15 minutes (Retry-After). */
  const starve = async (tw: TestWarehouse, n: number) => {
    for (let i = 0; i < n; i++) await rateBudgetOnPool(tw.w.pool, `tenant-${i}`).pause(15 * 60_000);
  };
  const deliveries = async (tw: TestWarehouse) =>
    (
      await tw.w.pool.query<{ attempts: number; sent: boolean; claimed: boolean; due: boolean }>(
        `select attempts, sent_at is not null as sent, claimed_until is not null as claimed,
                next_attempt_at <= now() as due
           from alert_deliveries where state = 'firing' order by incident`,
      )
    ).rows;

  it('when a receiver answers with a 400 MB body, then the sender reads at most a few KB of it and its memory grows by less than 50 MB', async () => {
    let written = 0;
    const huge = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(400 * MB) });
        const chunk = Buffer.alloc(64 * 1024, 'x');
        // Streams 400 MB as fast as the sender takes it (backpressure: nothing piles up here),
        // counting what reached the socket.
        let left = 400 * MB;
        const pump = () => {
          while (left > 0 && !res.destroyed) {
            left -= chunk.length;
            const more = res.write(chunk, (err) => {
              if (!err) written += chunk.length;
            });
            if (!more) return void res.once('drain', pump);
          }
          if (left <= 0) res.end();
        };
        res.on('close', () => {
          left = 0;
        });
        pump();
      });
    });
    await new Promise<void>((r) => huge.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(huge.address() as AddressInfo).port}/hook/secret`;
    // The sender in a process of its own, so that its memory is its own to measure.
    const script = `
      import { postWebhook } from ${JSON.stringify(path.join(root, 'src/alerts/webhook.ts'))};
      globalThis.gc?.();
      const before = process.memoryUsage().rss;
      const a = await postWebhook(${JSON.stringify(url)}, { text: 'hello' }, 60000);
      const peak = process.resourceUsage().maxRSS * 1024;
      process.stdout.write(JSON.stringify({ ok: a.ok, status: a.status, bodyChars: a.body.length, growth: peak - before }));
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const code = await new Promise((r) => child.once('exit', r));
    huge.closeAllConnections();
    await new Promise<void>((r) => huge.close(() => r()));
    expect(code).toBe(0);
    const r = JSON.parse(out) as { ok: boolean; status: number; bodyChars: number; growth: number };
    console.log(
      `alerts: a 400 MB answer: ${(written / MB).toFixed(1)} MB sent before the sender cut it, sender RSS +${(r.growth / MB).toFixed(1)} MB`,
    );
    expect(r).toMatchObject({ ok: true, status: 200, bodyChars: 200 });
    expect(r.growth).toBeLessThan(50 * MB);
    // What the receiver got out before the connection was cut: the part read, and what the
    // sockets' buffers held.
    expect(written).toBeLessThan(50 * MB);
    expect(MAX_ANSWER_BYTES).toBeLessThanOrEqual(4096);
  }, 120_000);

  it('when 15 incidents are open and the receiver hangs, then one check posts them in parallel under one deadline, and the rest go at the next check', async () => {
    const tw = await warehouse();
    await starve(tw, 15);
    rx.mode.a = 'hang';
    const pass = await runAlertPass(tw.w.db, settings(), silent);
    expect(pass.transitions.filter((t) => t.state === 'firing')).toHaveLength(15);
    // As many in flight at once as the bound allows; the check did not wait for them one by one.
    expect(rx.maxOpen).toBe(DELIVERY_CONCURRENCY);
    expect(rx.requests.a).toBe(DELIVERY_CONCURRENCY);
    const rows = await deliveries(tw);
    expect(rows.filter((d) => d.attempts === 1 && !d.sent && !d.claimed)).toHaveLength(DELIVERY_CONCURRENCY);
    expect(rows.filter((d) => d.attempts === 0 && d.due)).toHaveLength(15 - DELIVERY_CONCURRENCY);

    // The receiver answers again: the untried ones go at the next check, the others after
    // their backoff (moved on in the table rather than waited for); each once.
    rx.release();
    rx.mode.a = 'ok';
    await runAlertPass(tw.w.db, settings(), silent);
    expect(rx.taken).toHaveLength(15 - DELIVERY_CONCURRENCY);
    await tw.w.pool.query('update alert_deliveries set next_attempt_at = now() where sent_at is null');
    await runAlertPass(tw.w.db, settings(), silent);
    const incidents = rx.taken.map((t) => t.payload.event.incident);
    expect(incidents).toHaveLength(15);
    expect(new Set(incidents).size).toBe(15);
  }, 60_000);

  it("when a worker stops while its receiver hangs, then the monitor's stop returns without the receiver's answer, and the messages go at once from the next start", async () => {
    const tw = await warehouse();
    await starve(tw, 3);
    rx.mode.a = 'hang';
    // A timeout of five minutes: without a bound, stopping would wait for it three times over.
    const monitor = startAlertMonitor(tw.w.db, settings({ timeoutMs: 300_000 }), silent);
    while (rx.open < 3) await new Promise((r) => setTimeout(r, 50));
    await monitor.stop();
    // The receiver never answered: the sends were cut off, not waited for.
    expect(rx.requests.a).toBe(3);
    expect(rx.taken).toHaveLength(0);
    // Released, not backed off or leased: due at once for the next sender.
    expect(await deliveries(tw)).toEqual(
      Array.from({ length: 3 }, () => ({ attempts: 1, sent: false, claimed: false, due: true })),
    );
    rx.release();
    rx.mode.a = 'ok';
    const next = await runAlertPass(tw.w.db, settings(), silent);
    expect(next.sent).toBe(3);
  }, 60_000);

  it('when the webhook URL is rotated with messages undelivered, then the new receiver gets each open incident once, nothing stays undelivered, and no log shows either URL', async () => {
    const tw = await warehouse();
    await starve(tw, 2);
    const oldUrl = `${base}/a/T000/B000/leaked-secret-a9`;
    const newUrl = `${base}/b/T000/B000/fresh-secret-b7`;
    rx.mode.a = '500';
    await runAlertPass(tw.w.db, settings({ urls: [oldUrl] }), silent);
    expect(rx.requests.a).toBe(2);
    expect(rx.taken).toHaveLength(0);

    // The operator replaces the leaked URL and restarts: the next check is under the new one.
    const lines: string[] = [];
    const log = createLogger({
      level: 'info',
      pretty: false,
      destination: new Writable({
        write(c, _e, cb) {
          lines.push(c.toString());
          cb();
        },
      }),
    });
    await runAlertPass(tw.w.db, settings({ urls: [newUrl] }), log);
    expect(rx.taken.map((t) => [t.receiver, t.payload.event.kind, t.payload.event.state])).toEqual([
      ['b', 'budget_starved', 'firing'],
      ['b', 'budget_starved', 'firing'],
    ]);
    expect(rx.requests.a).toBe(2);
    const moved = lines.map((l) => JSON.parse(l)).find((l) => l.msg.includes('no longer configured'));
    expect(moved).toMatchObject({ messages: 2, receivers: [`${base}/…`] });
    const logged = lines.join('');
    for (const secret of ['leaked-secret-a9', 'fresh-secret-b7', '/T000/'])
      expect(logged).not.toContain(secret);

    // What the operator sees: nothing undelivered.
    const list = spawnSync(
      process.execPath,
      [path.join(root, 'bin/crs-sync.js'), 'alerts', 'list', '--json'],
      {
        env: { ...process.env, LOG_LEVEL: 'silent', DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema },
        encoding: 'utf8',
        cwd: mkdtempSync(path.join(tmpdir(), 'crs-alerts-')),
      },
    );
    expect(list.status).toBe(0);
    expect(JSON.parse(list.stdout).undelivered).toEqual([]);

    // The pauses end: the resolved messages go to the new receiver only, once each.
    await tw.w.pool.query(`update rate_budget set paused_until = clock_timestamp() - interval '1 second'`);
    await runAlertPass(tw.w.db, settings({ urls: [newUrl] }), silent);
    await runAlertPass(tw.w.db, settings({ urls: [newUrl] }), silent);
    expect(rx.taken.filter((t) => t.payload.event.state === 'resolved').map((t) => t.receiver)).toEqual([
      'b',
      'b',
    ]);
    expect(rx.requests.a).toBe(2);
  }, 60_000);
});
