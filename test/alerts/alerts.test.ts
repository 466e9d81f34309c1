import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AlertPayload } from '../../src/alerts/message.ts';
import { type AlertSettings, runAlertPass, startAlertMonitor } from '../../src/alerts/monitor.ts';
import { createServiceClient } from '../../src/api/index.ts';
import { ALERT_KINDS, ALERT_SEVERITY, type AlertKind } from '../../src/common/alert-kinds.ts';
import { closedDayLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { loadExportDay } from '../../src/ingest/source/export-day.ts';
import { createLogger } from '../../src/log.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { openWarehouse } from '../../src/warehouse/db.ts';
import { rateBudgetOnPool } from '../../src/warehouse/rate-budget.ts';
import { acceptSchemaDrift } from '../../src/warehouse/schema-drift.ts';
import { cliSync } from '../helpers/cli.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Alerts that reach people, over real HTTP: a local receiver takes the webhook's POSTs, the
 * conditions come from real loads of the simulator's export (or of a small export server standing
 * in for a service that drops or garbles lines), on real PostgreSQL.
 */

const log = createLogger({ level: 'silent', pretty: false });
const root = path.resolve(import.meta.dirname, '..', '..');

type Mode = 'ok' | '500' | 'hang';

describe('webhook alerts', () => {
  let sim: Simulator;
  let receiver: Server;
  let receiverUrl: string;
  let mode: Mode = 'ok';
  let received: AlertPayload[] = [];
  let onRequest: (() => void) | null = null;
  let exportServer: Server;
  let exportUrl: string;
  let exportBody = '';
  let day: string;
  let lines: string[];
  const warehouses: TestWarehouse[] = [];
  let loads = 0;

  beforeAll(async () => {
    sim = await startSimulator({ seed: 21, days: 4, recordsPerDay: 300, now: runningClock(PINNED) });
    const days = sim.truth.days();
    day = days[days.length - 3]!;
    lines = [...sim.truth.exportDayLines(day)];
    receiver = createServer((req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        onRequest?.();
        if (mode === 'hang') return; // never answers
        if (mode === '500') {
          res.writeHead(500).end('receiver broken');
          return;
        }
        received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as AlertPayload);
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    exportServer = createServer((req, res) => {
      if (!req.url?.startsWith('/v2/analytics/messages')) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/x-ndjson' }).end(exportBody);
    });
    for (const s of [receiver, exportServer]) await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/T000/B000/secret-path-x1`;
    exportUrl = `http://127.0.0.1:${(exportServer.address() as AddressInfo).port}`;
  });
  afterEach(() => {
    // Every alert that reached the receiver had its kind's one severity (docs/alerts.md's table).
    for (const m of received.filter((r) => (ALERT_KINDS as readonly string[]).includes(r.event.kind)))
      expect(m.event.severity, m.event.kind).toBe(ALERT_SEVERITY[m.event.kind as AlertKind]);
    mode = 'ok';
    received = [];
    onRequest = null;
  });
  afterAll(async () => {
    await sim?.close();
    receiver?.closeAllConnections();
    for (const s of [receiver, exportServer]) await new Promise<void>((r) => (s ? s.close(() => r()) : r()));
    for (const tw of warehouses) await tw.dispose();
  });

  const warehouse = async () => {
    const tw = await createTestWarehouse({ prefix: 'alerts' });
    warehouses.push(tw);
    return tw;
  };
  const settings = (o: Partial<AlertSettings> = {}): AlertSettings => ({
    freshnessSlaSeconds: 26 * 3600,
    quarantineShare: 0.05,
    budgetWaitMs: 300_000,
    urls: [receiverUrl],
    timeoutMs: 1_000,
    checkIntervalMs: 60_000,
    ...o,
  });
  /** Loads the day from the simulator (`faults` per request) or from the stand-in export server. */
  const load = (tw: TestWarehouse, from: { faults?: string; body?: string } = {}) => {
    if (from.body !== undefined) exportBody = from.body;
    const config = parseConfig({
      ...sim.env(),
      ...(from.body !== undefined ? { CRS_BASE_URL: exportUrl } : {}),
      CRS_RATE_LIMIT_RPS: '1000',
    });
    const client = createServiceClient(
      {
        ...config.api,
        concurrency: 2,
        baseBackoffMs: 5,
        maxBackoffMs: 20,
        ...(from.faults ? { extraHeaders: { 'x-sim-faults': from.faults } } : {}),
      },
      log,
    );
    return loadExportDay(
      { warehouse: tw.w, client, config, log },
      { target: closedDayLoad(`alerts-${++loads}`, day) },
    );
  };
  const failDay = async (tw: TestWarehouse) => {
    await expect(load(tw, { faults: 'expire=1' })).rejects.toThrow();
    expect((await tw.w.pool.query('select status from sync_days where day = $1', [day])).rows[0]).toEqual({
      status: 'failed',
    });
  };
  const states = (kind: string) => received.filter((m) => m.event.kind === kind).map((m) => m.event.state);
  const incidentsOf = (kind: string) =>
    new Set(received.filter((m) => m.event.kind === kind).map((m) => m.event.incident));

  it("when a day's export answers 401 on every attempt, then one firing day_failed, and one resolved once the day loads", async () => {
    const tw = await warehouse();
    await failDay(tw);
    await runAlertPass(tw.w.db, settings(), log);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('day_failed')).toEqual(['firing']);
    const firing = received.find((m) => m.event.kind === 'day_failed')!;
    expect(firing.event).toMatchObject({
      severity: 'critical',
      state: 'firing',
      first_command: 'crs-sync status',
    });
    expect(firing.text).toContain(day);
    // The credential the load presented appears nowhere in what was sent.
    expect(JSON.stringify(received)).not.toContain(sim.env().CRS_SERVICE_ACCOUNT_TOKEN);

    await load(tw);
    await runAlertPass(tw.w.db, settings(), log);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('day_failed')).toEqual(['firing', 'resolved']);
    expect(incidentsOf('day_failed').size).toBe(1);
  });

  it('when the watermark is older than the SLA, then one firing freshness_late, and one resolved once it is current', async () => {
    const tw = await warehouse();
    await tw.w.pool.query(
      `insert into sync_days (day, status) select d::date, 'complete'
         from generate_series(date '2026-10-01', date '2026-10-03', interval '1 day') d`,
    );
    await runAlertPass(tw.w.db, settings(), log);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('freshness_late')).toEqual(['firing']);
    const health = (await tw.w.pool.query('select export_freshness, freshness_sla_seconds from sync_health'))
      .rows[0];
    expect(health).toEqual({ export_freshness: 'late', freshness_sla_seconds: 26 * 3600 });

    await tw.w.pool.query(
      `insert into sync_days (day, status) select d::date, 'complete'
         from generate_series(date '2026-10-04', (now() at time zone 'UTC')::date - 1, interval '1 day') d`,
    );
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('freshness_late')).toEqual(['firing', 'resolved']);
    expect((await tw.w.pool.query('select export_freshness from sync_health')).rows[0]).toEqual({
      export_freshness: 'on_time',
    });
  });

  it('when a complete export would delete half the day, then one firing deletes_held, and one resolved once the rows come back', async () => {
    const tw = await warehouse();
    await load(tw, { body: `${lines.join('\n')}\n` });
    await load(tw, { body: `${lines.slice(0, Math.floor(lines.length / 2)).join('\n')}\n` });
    await runAlertPass(tw.w.db, settings(), log);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('deletes_held')).toEqual(['firing']);
    expect(received.find((m) => m.event.kind === 'deletes_held')!.event.first_command).toBe(
      'crs-sync deletes list',
    );

    await load(tw, { body: `${lines.join('\n')}\n` });
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('deletes_held')).toEqual(['firing', 'resolved']);
  });

  it("when a day's load quarantines more than the share, then one firing quarantine_spike, and one resolved after a clean load", async () => {
    const tw = await warehouse();
    const garbled = lines.flatMap((l, i) => (i % 5 === 0 ? ['{"not": "a record"', l] : [l]));
    await load(tw, { body: `${garbled.join('\n')}\n` });
    await runAlertPass(tw.w.db, settings(), log);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('quarantine_spike')).toEqual(['firing']);

    await load(tw, { body: `${lines.join('\n')}\n` });
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('quarantine_spike')).toEqual(['firing', 'resolved']);
  });

  it('when the export starts sending a new field, then one firing schema_drift, and one resolved once the contract is widened by it', async () => {
    const tw = await warehouse();
    const withRegion = lines.map((l) => l.replace(/^\{/, '{"Region": "eu-west-1", '));
    await load(tw, { body: `${withRegion.join('\n')}\n` });
    await runAlertPass(tw.w.db, settings(), log);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('schema_drift')).toEqual(['firing']);
    const firing = received.find((m) => m.event.kind === 'schema_drift');
    expect(firing?.event.summary).toBe('export: 1 field(s) differ from the contract: new_field Region');

    // Loading it again is the same drift, not a new incident.
    await load(tw, { body: `${withRegion.join('\n')}\n` });
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('schema_drift')).toEqual(['firing']);

    expect(await acceptSchemaDrift(tw.w.db, 'export', 'Region')).toBe(1);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('schema_drift')).toEqual(['firing', 'resolved']);
    expect(incidentsOf('schema_drift').size).toBe(1);
  });

  it('when a line brings thousands of new fields, one named as a Slack mention and link, then one schema_drift message names a few of them, escaped, and how many more', async () => {
    const tw = await warehouse();
    const evil = '<!channel> <https://evil.example|re-authenticate>';
    const extra = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`extra_field_${i}`, i]));
    const first = JSON.stringify({ [evil]: 'x', ...extra }).slice(1, -1);
    const body = lines.map((l, i) => (i === 0 ? l.replace(/^\{/, `{${first}, `) : l)).join('\n');
    await load(tw, { body: `${body}\n` });
    const drifts = await tw.w.pool.query(
      `select count(*)::int as n from schema_drift where source = 'export'`,
    );
    expect(drifts.rows[0]).toEqual({ n: 3001 });
    await runAlertPass(tw.w.db, settings(), log);
    await runAlertPass(tw.w.db, settings(), log);

    const drift = received.filter((m) => m.event.kind === 'schema_drift');
    expect(drift.map((m) => m.event.state)).toEqual(['firing']);
    const text = drift[0]!.text;
    // Nothing from the data is read as Slack markup: no mention, no link.
    expect(text).not.toMatch(/<!|<https?:/);
    expect(text).toContain('&lt;!channel&gt; &lt;https://evil.example|re-authenticate&gt;');
    expect(text).toContain('and 2996 more');
    expect(text.length).toBeLessThan(1_000);
    // The event keeps the field's name as it is, for receivers that read JSON.
    expect(drift[0]!.event.details).toMatchObject({ source: 'export', drifts: 3001, more: 2996 });
    expect((drift[0]!.event.details.first as { path: string }[]).map((d) => d.path)).toContain(evil);
  });

  it('when the enrichment queue has waited past the SLA, then one firing enrichment_stalled, and one resolved once the threads are enriched', async () => {
    const tw = await warehouse();
    await load(tw);
    // The queue of the load's threads has waited two days (no worker enriched them).
    const queued = await tw.w.pool.query(
      `update threads set enrich_requested_at = now() - interval '2 days' where enrich_status = 'pending'`,
    );
    expect(queued.rowCount).toBeGreaterThan(0);
    await runAlertPass(tw.w.db, settings(), log);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('enrichment_stalled')).toEqual(['firing']);
    expect(received.find((m) => m.event.kind === 'enrichment_stalled')!.event.summary).toMatch(
      /oldest pending thread has waited 4[89] h, past the SLA of 26 h/,
    );

    const api = createServiceClient(
      {
        ...parseConfig({ ...sim.env(), CRS_RATE_LIMIT_RPS: '1000' }).api,
        concurrency: 4,
        baseBackoffMs: 5,
        maxBackoffMs: 20,
      },
      log,
    );
    const ops = createEnrichOps({ db: tw.w.db, pool: tw.w.pool, api, log, concurrency: 4, pageSize: 20 });
    for (let after: string | null = null; ; ) {
      const ids = await ops.listPendingThreads({ afterThreadId: after, limit: 50 });
      if (ids.length === 0) break;
      await ops.enrichThreads({ threadIds: ids, loadId: 'alerts-enrich' });
      after = ids[ids.length - 1] ?? null;
    }
    expect((await tw.w.pool.query(`select 1 from threads where enrich_status = 'pending'`)).rowCount).toBe(0);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('enrichment_stalled')).toEqual(['firing', 'resolved']);
  });

  it('when the service pauses the shared request budget past the limit, then one firing budget_starved, and one resolved once the pause is over', async () => {
    const tw = await warehouse();
    // What a worker does with a 429 whose Retry-After is 15 minutes.
    await rateBudgetOnPool(tw.w.pool, 'tenant').pause(15 * 60_000);
    await runAlertPass(tw.w.db, settings(), log);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('budget_starved')).toEqual(['firing']);
    expect(received.find((m) => m.event.kind === 'budget_starved')!.event.summary).toMatch(
      /budget "tenant" holds every request for (89\d|900) s \(limit 300 s\)/,
    );
    // A pause shorter than the limit is the service's normal throttling: nothing new fires.
    await rateBudgetOnPool(tw.w.pool, 'other').pause(60_000);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('budget_starved')).toEqual(['firing']);

    // The pause runs out (the clock, moved on in the table rather than waited for).
    await tw.w.pool.query(`update rate_budget set paused_until = clock_timestamp() - interval '1 second'`);
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('budget_starved')).toEqual(['firing', 'resolved']);
  });

  it('when three checkers run at once on one warehouse, then each incident is announced once, not three times', async () => {
    const tw = await warehouse();
    await failDay(tw);
    const pools = [0, 1, 2].map(() => openWarehouse({ url: tw.url, schema: tw.schema, max: 2 }));
    try {
      const round = () => Promise.all(pools.map((p) => runAlertPass(p.db, settings(), log)));
      await round();
      await round();
      expect(states('day_failed')).toEqual(['firing']);
      // The export is `failing` (the failed day), not late: one failure, one page.
      expect(states('freshness_late')).toEqual([]);
      await load(tw);
      await round();
      await round();
      expect(states('day_failed')).toEqual(['firing', 'resolved']);
      expect(received.length).toBe(new Set(received.map((m) => `${m.event.incident} ${m.event.state}`)).size);
    } finally {
      for (const p of pools) await p.close();
    }
  });

  it('when the sender is killed mid-send, then after a restart the incident is delivered, every copy under one incident id', async () => {
    const tw = await warehouse();
    await failDay(tw);
    mode = 'hang';
    const env = {
      ...process.env,
      LOG_LEVEL: 'silent',
      DATABASE_URL: tw.url,
      CRS_SCHEMA: tw.schema,
      CRS_ALERT_WEBHOOK_URL: receiverUrl,
      CRS_ALERT_TIMEOUT: '2s',
    };
    const child: ChildProcess = spawn(
      process.execPath,
      [path.join(root, 'bin/crs-sync.js'), 'alerts', 'check'],
      {
        env,
        cwd: mkdtempSync(path.join(tmpdir(), 'crs-alerts-')),
        stdio: 'ignore',
      },
    );
    const exited = new Promise((r) => child.once('exit', r));
    await new Promise<void>((r) => {
      onRequest = r;
    });
    child.kill('SIGKILL');
    await exited;
    mode = 'ok';
    // The killed sender's lease runs out (twice its timeout and 5 s); then a restart sends it.
    for (let i = 0; i < 60 && states('day_failed').length === 0; i++) {
      await runAlertPass(tw.w.db, settings(), log);
      if (states('day_failed').length === 0) await new Promise((r) => setTimeout(r, 500));
    }
    expect(states('day_failed')).toEqual(['firing']);
    const row = (
      await tw.w.pool.query(
        "select sent_at is not null as sent, attempts from alert_deliveries where state = 'firing' and incident like 'day_failed:%'",
      )
    ).rows[0];
    expect(row).toEqual({ sent: true, attempts: 2 });
  });

  it('when the receiver answers 500 or hangs, then the loads are unchanged, and the alert arrives once it answers again', async () => {
    const tw = await warehouse();
    await failDay(tw);
    mode = '500';
    await runAlertPass(tw.w.db, settings(), log);
    const monitor = startAlertMonitor(tw.w.db, settings({ checkIntervalMs: 200, timeoutMs: 300 }), log);
    mode = 'hang';
    try {
      const s = await load(tw);
      expect(s.inserted).toBe(lines.length);
    } finally {
      await monitor.stop();
    }
    const stored = await tw.w.pool.query(
      'select count(*)::int as n from analytics_messages where message_date = $1 and _deleted_at is null',
      [day],
    );
    expect(stored.rows[0]).toEqual({ n: lines.length });
    const d = (
      await tw.w.pool.query(
        "select last_status, sent_at from alert_deliveries where state = 'firing' and incident like 'day_failed:%'",
      )
    ).rows[0];
    expect(d).toEqual({ last_status: 500, sent_at: null });
    mode = 'ok';
    // Time passes past the backoff (30 s after the first failure): the retry is due now.
    await tw.w.pool.query('update alert_deliveries set next_attempt_at = now()');
    await runAlertPass(tw.w.db, settings(), log);
    expect(states('day_failed')).toEqual(['firing', 'resolved']);
  });

  it('when a day fails with a worker checking every second, then the receiver has the alert within the target (figure printed)', async () => {
    const tw = await warehouse();
    await tw.w.pool.query(`insert into sync_days (day, status) values ('2026-10-01', 'complete')`);
    const monitor = startAlertMonitor(tw.w.db, settings({ checkIntervalMs: 1_000 }), log);
    try {
      await new Promise((r) => setTimeout(r, 300));
      await failDay(tw);
      const failedAt = Date.now();
      while (states('day_failed').length === 0) await new Promise((r) => setTimeout(r, 50));
      console.log(
        `alerts: from a failed day to the receiver: ${((Date.now() - failedAt) / 1000).toFixed(1)} s (check interval 1 s; target 300 s)`,
      );
    } finally {
      await monitor.stop();
    }
    expect(states('day_failed')).toEqual(['firing']);
  });

  describe('the CLI', () => {
    const cli = (args: string[], env: Record<string, string>) =>
      cliSync(args, { env, tmpPrefix: 'crs-alerts-' });

    it('when CRS_ALERT_WEBHOOK_URL holds a malformed URL, then exit 2 lists it with the other problems and shows no URL', () => {
      const r = cli(['alerts', 'test'], {
        CRS_ALERT_WEBHOOK_URL: 'https://hooks.example.com/services/T1/B1/very-secret-part, not a url',
        CRS_FRESHNESS_SLA: 'soon',
      });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('CRS_ALERT_WEBHOOK_URL: entry 2 is not an http(s) URL');
      expect(r.stderr).toContain('CRS_FRESHNESS_SLA: must be a duration');
      expect(r.stderr).not.toContain('very-secret-part');
      expect(r.stderr).not.toContain('not a url');
    });

    it('when alerts test runs, then the receiver gets a Slack-compatible message and the command says what it answered', async () => {
      const child = spawn(process.execPath, [path.join(root, 'bin/crs-sync.js'), 'alerts', 'test'], {
        env: { ...process.env, LOG_LEVEL: 'silent', CRS_ALERT_WEBHOOK_URL: receiverUrl },
        cwd: mkdtempSync(path.join(tmpdir(), 'crs-alerts-')),
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
      });
      const code = await new Promise((r) => child.once('exit', r));
      expect(code).toBe(0);
      expect(out).toContain('ok: HTTP 200 "ok"');
      expect(out).not.toContain('secret-path-x1');
      expect(received).toHaveLength(1);
      expect(received[0]!.event).toMatchObject({ kind: 'test', state: 'firing' });
      expect(typeof received[0]!.text).toBe('string');
    });

    it('when incidents exist, then alerts list --json shows the open and the resolved ones, and status --json the freshness', async () => {
      const tw = await warehouse();
      await failDay(tw);
      await runAlertPass(tw.w.db, settings(), log);
      await load(tw);
      await runAlertPass(tw.w.db, settings(), log);
      const env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema };
      const list = cli(['alerts', 'list', '--json'], env);
      expect(list.code).toBe(0);
      const incidents = (
        JSON.parse(list.stdout) as { incidents: { kind: string; resolvedAt: string | null }[] }
      ).incidents;
      // One incident of each kind, found by kind: a missing one fails here, not as "not null".
      const byKind = (kind: string) => incidents.filter((i) => i.kind === kind);
      expect(byKind('day_failed')).toEqual([
        expect.objectContaining({ resolvedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) }),
      ]);
      expect(byKind('freshness_late')).toEqual([expect.objectContaining({ resolvedAt: null })]);

      const status = cli(['status', '--json'], { ...env, CRS_FRESHNESS_SLA: '1000d' });
      expect(status.code).toBe(2); // 1000 days is past the setting's bound
      // Status judges by the deployment's stored SLA (the first check's, 26 h), as the alerts do,
      // not by this configuration's 90 days.
      const ok = cli(['status', '--json'], { ...env, CRS_FRESHNESS_SLA: '90d' });
      const f = (JSON.parse(ok.stdout) as { freshness: Record<string, unknown> }).freshness;
      expect(f).toMatchObject({
        sla_seconds: 26 * 3600,
        export: { state: 'late', age_seconds: expect.any(Number) },
        enrichment: {
          state: expect.stringMatching(/^(on_time|late|failing)$/),
          age_seconds: expect.any(Number),
        },
      });
      const text = cli(['status'], env);
      expect(text.stdout).toMatch(/freshness {3}export late \(age \d+h \d+m\)/);
    });
  });
});
