import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AlertPayload } from '../../src/alerts/message.ts';
import { type AlertSettings, runAlertPass } from '../../src/alerts/monitor.ts';
import { targetOf } from '../../src/alerts/webhook.ts';
import { createLogger } from '../../src/log.ts';
import { migrateToLatest } from '../../src/warehouse/migrator.ts';
import { createTestWarehouse, migrateToBefore, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * A deployment that ran alerts before the deployment's settings were stored and drift became one
 * incident per source, upgraded: migrated from the schema just before
 * 2026-11-28T11-00-00_alerts_settings_no_data to the latest, then checked.
 */

const MIGRATION = '2026-11-28T11-00-00_alerts_settings_no_data';
const silent = createLogger({ level: 'silent', pretty: false });

describe('upgrading a deployment that has alerted before', () => {
  let tw: TestWarehouse;
  let receiver: Server;
  let url: string;
  const taken: AlertPayload[] = [];

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        taken.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as AlertPayload);
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook/secret`;
    tw = await createTestWarehouse({ prefix: 'alertup', migrate: false });
    await migrateToBefore(tw, MIGRATION);
  });
  afterAll(async () => {
    receiver?.closeAllConnections();
    await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
    await tw?.dispose();
  });

  const settings: AlertSettings = {
    freshnessSlaSeconds: 26 * 3600,
    quarantineShare: 0.01,
    budgetWaitMs: 300_000,
    urls: [],
    timeoutMs: 1_000,
    checkIntervalMs: 60_000,
  };

  it('when it had one drift incident per field and a first check days ago, then after the upgrade one incident per source stays open, no resolved message goes for the others, and it is not given a new grace period', async () => {
    const q = (text: string, values: unknown[] = []) => tw.w.pool.query(text, values);
    // Three drifts of the export, announced one incident each, the last one's message still due;
    // its SLA stored by the checks since three days (no day complete: late all along).
    await q(`insert into schema_drift (source, path, kind, actual_type, example)
             values ('export', 'Region', 'new_field', 'string', '"eu"'),
                    ('export', 'Zone', 'new_field', 'string', '"a"'),
                    ('export', 'Rack', 'new_field', 'string', '"r1"')`);
    for (const [i, p] of ['Region', 'Zone', 'Rack'].entries()) {
      const incident = `schema_drift:export:${p}:new_field@2026-11-2${i}`;
      await q(
        `insert into alert_incidents (incident, key, kind, severity, summary, opened_at, firing_notified_at)
         values ($1, $2, 'schema_drift', 'warning', $3, now() - ($4 || ' hours')::interval, case when $5 then now() end)`,
        [incident, `schema_drift:export:${p}:new_field`, `export: new_field ${p}`, String(30 - i), i < 2],
      );
      await q(
        `insert into alert_deliveries (incident, state, target, sent_at) values ($1, 'firing', $2, $3)`,
        [incident, targetOf(url), i < 2 ? new Date() : null],
      );
    }
    await q(`insert into freshness_sla (sla_seconds, updated_at) values (93600, now() - interval '3 days')`);

    await migrateToLatest(tw.w);
    const open = (
      await q(`select incident, key from alert_incidents where kind = 'schema_drift' and resolved_at is null`)
    ).rows;
    expect(open).toEqual([
      { incident: 'schema_drift:export:Region:new_field@2026-11-20', key: 'schema_drift:export' },
    ]);
    // The closed one never announced keeps no message due.
    expect(
      (await q('select incident from alert_deliveries where sent_at is null')).rows.map((r) => r.incident),
    ).toEqual([]);
    // Its first check was three days ago: late now, not a new deployment's no_data.
    expect((await q('select export_freshness from sync_health')).rows[0]).toEqual({
      export_freshness: 'late',
    });

    await runAlertPass(tw.w.db, { ...settings, urls: [url] }, silent);
    await runAlertPass(tw.w.db, { ...settings, urls: [url] }, silent);
    // The drift stays one open incident, named as it is now; nothing resolved was announced.
    expect(taken.filter((m) => m.event.kind === 'schema_drift')).toEqual([]);
    const drift = (
      await q(`select summary from alert_incidents where key = 'schema_drift:export' and resolved_at is null`)
    ).rows;
    expect(drift).toEqual([
      {
        summary:
          'export: 3 field(s) differ from the contract: new_field Rack, new_field Region, new_field Zone',
      },
    ]);
    expect(taken.map((m) => [m.event.kind, m.event.state])).toEqual([['freshness_late', 'firing']]);
  });
});
