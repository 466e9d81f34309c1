import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AlertPayload } from '../../src/alerts/message.ts';
import { type AlertSettings, createAlertChecker, runAlertPass } from '../../src/alerts/monitor.ts';
import { createLogger } from '../../src/log.ts';
import { openWarehouse, type Warehouse } from '../../src/warehouse/db.ts';
import { healthViewFreshness, readFreshness } from '../../src/warehouse/read/freshness.ts';
import { cliSync } from '../helpers/cli.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Alerts across a deployment, as its operators meet them: workers configured apart (a rolling
 * deploy), a webhook URL rotated while a receiver hangs, and a new deployment before its first
 * day. Real PostgreSQL, a real local receiver, the real CLI.
 */

const silent = createLogger({ level: 'silent', pretty: false });
const H = 3600;

/** A logger whose JSON lines land in `lines`. */
function capturingLogger(): { log: ReturnType<typeof createLogger>; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({
    level: 'info',
    pretty: false,
    destination: new Writable({
      write(c, _e, cb) {
        lines.push(JSON.parse(c.toString()) as Record<string, unknown>);
        cb();
      },
    }),
  });
  return { log, lines };
}

describe('alerts across a deployment', () => {
  let receiver: Server;
  let base: string;
  /** Receivers by path prefix: `a` hangs when told to, the others answer 200. */
  let hangA = false;
  let taken: { receiver: string; payload: AlertPayload }[] = [];
  const hung: ServerResponse[] = [];
  const warehouses: TestWarehouse[] = [];
  const pools: Warehouse[] = [];

  beforeAll(async () => {
    receiver = createServer((req: IncomingMessage, res: ServerResponse) => {
      const name = req.url?.split('/')[1] ?? '';
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (name === 'a' && hangA) return void hung.push(res);
        taken.push({ receiver: name, payload: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  });
  afterEach(() => {
    for (const r of hung.splice(0)) r.destroy();
    hangA = false;
    taken = [];
  });
  afterAll(async () => {
    for (const r of hung.splice(0)) r.destroy();
    receiver?.closeAllConnections();
    await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
    for (const p of pools) await p.close();
    for (const tw of warehouses) await tw.dispose();
  });

  const warehouse = async () => {
    const tw = await createTestWarehouse({ prefix: 'alertdep' });
    warehouses.push(tw);
    return tw;
  };
  /** A worker of its own: its own pool on the warehouse. */
  const pool = (tw: TestWarehouse) => {
    const w = openWarehouse({ url: tw.url, schema: tw.schema, max: 2 });
    pools.push(w);
    return w;
  };
  const settings = (o: Partial<AlertSettings> = {}): AlertSettings => ({
    freshnessSlaSeconds: 26 * H,
    quarantineShare: 0.01,
    budgetWaitMs: 300_000,
    urls: [`${base}/b/T000/B000/secret-b`],
    timeoutMs: 1_000,
    checkIntervalMs: 60_000,
    ...o,
  });
  /** Complete days from `from` to `to` days ago (UTC). */
  const completeDays = (tw: TestWarehouse, from: number, to: number) =>
    tw.w.pool.query(
      `insert into sync_days (day, status)
       select d::date, 'complete' from generate_series((now() at time zone 'UTC')::date - $1::int,
                                                       (now() at time zone 'UTC')::date - $2::int, interval '1 day') d
       on conflict (day) do update set status = 'complete'`,
      [from, to],
    );
  const cli = (tw: TestWarehouse, args: string[], env: Record<string, string> = {}) =>
    cliSync(args, { env: { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema, ...env }, tmpPrefix: 'crs-alerts-' });
  const messages = (kind: string) =>
    taken.filter((t) => t.payload.event.kind === kind).map((t) => [t.receiver, t.payload.event.state]);
  const incidentRows = async (tw: TestWarehouse, kind: string) =>
    (await tw.w.pool.query('select incident from alert_incidents where kind = $1', [kind])).rows;

  it('when a worker with another CRS_FRESHNESS_SLA joins, then incidents follow the stored SLA, it warns once naming the setting and both values, and the health view keeps the stored SLA', async () => {
    const tw = await warehouse();
    // The newest complete day ended two days ago: late by 26 h, on time by 90 days.
    await completeDays(tw, 10, 3);
    const first = createAlertChecker(pool(tw).db, settings(), silent);
    const { log, lines } = capturingLogger();
    const second = createAlertChecker(pool(tw).db, settings({ freshnessSlaSeconds: 90 * 24 * H }), log);
    for (let i = 0; i < 3; i++) {
      await first.pass();
      await second.pass();
    }
    expect(messages('freshness_late')).toEqual([['b', 'firing']]);
    expect(await incidentRows(tw, 'freshness_late')).toHaveLength(1);
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ setting: 'CRS_FRESHNESS_SLA', stored: 26 * H, own: 90 * 24 * H });
    expect(String(warnings[0]!.msg)).toContain('CRS_FRESHNESS_SLA');
    const health = await tw.w.pool.query('select freshness_sla_seconds, export_freshness from sync_health');
    expect(health.rows[0]).toEqual({ freshness_sla_seconds: 26 * H, export_freshness: 'late' });
    expect((await healthViewFreshness(tw.w.pool)).sla_seconds).toBe(26 * H);

    // The operator makes the 90 days the deployment's: from the next check on, all judge by it.
    const shown = cli(tw, ['alerts', 'settings'], { CRS_FRESHNESS_SLA: '90d' });
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/CRS_FRESHNESS_SLA .*26h \(93600 s\) .*2160h \(7776000 s\) .*differs/);
    const stored = cli(tw, ['alerts', 'settings', '--store', '--json'], { CRS_FRESHNESS_SLA: '90d' });
    expect(stored.code).toBe(0);
    expect(JSON.parse(stored.stdout)).toMatchObject({
      stored: { freshnessSlaSeconds: 90 * 24 * H },
      before: { freshnessSlaSeconds: 26 * H },
      differences: [],
    });
    await first.pass();
    await second.pass();
    expect(messages('freshness_late')).toEqual([
      ['b', 'firing'],
      ['b', 'resolved'],
    ]);
    expect((await healthViewFreshness(tw.w.pool)).sla_seconds).toBe(90 * 24 * H);
  });

  it('when three workers with different settings, one with the old webhook URL whose receiver hangs, check through a real failure, then there is one incident, one firing and one resolved message', async () => {
    const tw = await warehouse();
    await completeDays(tw, 10, 3);
    hangA = true;
    const workers = [
      // The first: the stored settings are its; still on the old (leaked) URL, whose receiver hangs.
      settings({ urls: [`${base}/a/T000/B000/old-secret`] }),
      settings({ freshnessSlaSeconds: 90 * 24 * H, quarantineShare: 0.5, budgetWaitMs: 60_000 }),
      settings({ freshnessSlaSeconds: 1 * H, quarantineShare: 0.001 }),
    ].map((s) => createAlertChecker(pool(tw).db, s, silent));
    const round = () => Promise.all(workers.map((w) => w.pass()));
    // The deployment's first check is the first worker's: its settings are stored.
    await workers[0]!.pass();
    /** Rounds until `done` (each at most a timeout long); a message backed off is due after its backoff, moved on in the table. */
    const until = async (done: () => boolean) => {
      for (let i = 0; i < 12 && !done(); i++) {
        await round();
        await tw.w.pool.query('update alert_deliveries set next_attempt_at = now() where sent_at is null');
      }
    };
    await until(() => messages('freshness_late').length > 0);
    await round();
    expect(messages('freshness_late')).toEqual([['b', 'firing']]);
    // The old receiver was posted to, and hung: what reached the new one is the same message.
    expect(hung.length).toBeGreaterThan(0);

    // The export catches up: the failure is over.
    await completeDays(tw, 2, 1);
    await until(() => messages('freshness_late').length > 1);
    await round();
    await round();
    expect(messages('freshness_late')).toEqual([
      ['b', 'firing'],
      ['b', 'resolved'],
    ]);
    expect(await incidentRows(tw, 'freshness_late')).toHaveLength(1);
    expect(new Set(taken.map((t) => t.payload.event.incident)).size).toBe(1);
    // Nothing left undelivered anywhere.
    expect(
      (await tw.w.pool.query('select count(*)::int as n from alert_deliveries where sent_at is null'))
        .rows[0],
    ).toEqual({ n: 0 });
  }, 120_000);

  it('when a new deployment has not loaded a day yet, then status says no_data, its first check opens no freshness_late, and one SLA later it does', async () => {
    const tw = await warehouse();
    const before = JSON.parse(cli(tw, ['status', '--json']).stdout) as {
      freshness: { export: Record<string, unknown> };
    };
    expect(before.freshness.export).toMatchObject({
      state: 'no_data',
      age_seconds: null,
      no_data_until: null,
    });

    // The first worker starts (here: the first check from cron), before the first backfill.
    const check = cli(tw, ['alerts', 'check'], { CRS_ALERT_WEBHOOK_URL: `${base}/b/T000/B000/secret-b` });
    expect(check.code).toBe(0);
    expect(check.stdout).toContain('0 change(s), 0 message(s) sent');
    expect(taken).toEqual([]);

    const status = cli(tw, ['status', '--json']);
    const f = (
      JSON.parse(status.stdout) as { freshness: { export: { state: string; no_data_until: string } } }
    ).freshness.export;
    expect(f.state).toBe('no_data');
    const started = (await tw.w.pool.query<{ at: Date }>('select started_at as at from alert_settings'))
      .rows[0]!.at;
    expect(f.no_data_until).toBe(new Date(started.getTime() + 26 * H * 1000).toISOString());
    expect(cli(tw, ['status']).stdout).toMatch(
      /^freshness {3}export no_data \(no complete day yet; late from \d{4}-\d\d-\d\d \d\d:\d\d UTC if none is\)/m,
    );
    expect((await tw.w.pool.query('select export_freshness from sync_health')).rows[0]).toEqual({
      export_freshness: 'no_data',
    });
    expect((await healthViewFreshness(tw.w.pool)).export.state).toBe('no_data');
    expect((await readFreshness(tw.w.db, 26 * H)).export.state).toBe('no_data');

    // A day later nothing is complete yet: still within the SLA, still quiet.
    await tw.w.pool.query(`update alert_settings set started_at = now() - interval '24 hours'`);
    await runAlertPass(tw.w.db, settings(), silent);
    expect(messages('freshness_late')).toEqual([]);

    // One SLA after the first check with no complete day: late, and paged once.
    await tw.w.pool.query(`update alert_settings set started_at = now() - interval '27 hours'`);
    await runAlertPass(tw.w.db, settings(), silent);
    await runAlertPass(tw.w.db, settings(), silent);
    expect(messages('freshness_late')).toEqual([['b', 'firing']]);
    expect(taken[0]!.payload.event.summary).toBe(
      'no day of the export is loaded complete yet, 26 h (the SLA) after the first check',
    );
    expect((await tw.w.pool.query('select export_freshness from sync_health')).rows[0]).toEqual({
      export_freshness: 'late',
    });
  }, 60_000);
});
