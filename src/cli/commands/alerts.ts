import type { Command } from 'commander';
import { alertPayload } from '../../alerts/message.ts';
import { alertSettings, runAlertPass } from '../../alerts/monitor.ts';
import { describeTarget, postWebhook } from '../../alerts/webhook.ts';
import { renderTable } from '../../common/table.ts';
import { terminalText } from '../../common/terminal-text.ts';
import { CrsError } from '../../errors.ts';
import {
  type JudgedSettings,
  readAlertSettings,
  type StoredAlertSettings,
  settingDifferences,
  storeAlertSettings,
} from '../../warehouse/alert-settings.ts';
import { listIncidents, pendingDeliveries } from '../../warehouse/incidents.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';
import { printRows } from '../output.ts';

const utc = (iso: string | null) => (iso ? iso.slice(0, 19).replace('T', ' ') : '');

/** `crs-sync alerts test|list|settings|check`. Long: one commander definition of four subcommands. */
export function registerAlerts(program: Command): void {
  const alerts = program
    .command('alerts')
    .summary('webhook alerts: send a test message, list incidents, run one check')
    .description(
      'Every worker checks the alert conditions every CRS_ALERT_CHECK_INTERVAL (a failed day, late ' +
        'data, held deletes, a quarantine spike, schema drift, stalled enrichment, a starved request ' +
        'budget) and posts one message per incident to each CRS_ALERT_WEBHOOK_URL when it opens ' +
        '(firing) and when it clears (resolved). See docs/alerts.md.',
    );

  alerts
    .command('test')
    .description('post a test message to every CRS_ALERT_WEBHOOK_URL and show what each receiver answered')
    .action(async () => {
      const { config } = loadContext();
      const urls = config.alerts.webhookUrls;
      if (urls.length === 0)
        throw new CrsError(
          'CONFIG_INVALID',
          'invalid configuration:\n  - CRS_ALERT_WEBHOOK_URL: required for alerts test',
        );
      const now = new Date().toISOString();
      let failed = 0;
      for (const url of urls) {
        const payload = alertPayload({
          kind: 'test',
          severity: 'info',
          summary: 'a test message from crs-sync alerts test; nothing is wrong',
          incident: `test@${now}`,
          state: 'firing',
          opened_at: now,
          resolved_at: null,
          details: {},
        });
        const a = await postWebhook(url, payload, config.alerts.timeoutMs);
        const answer =
          !a.ok && a.status === null
            ? a.error
            : `HTTP ${a.status}${a.body ? ` ${JSON.stringify(a.body)}` : ''}`;
        // The receiver's answer is whatever it sent.
        process.stdout.write(terminalText(`${describeTarget(url)}  ${a.ok ? 'ok' : 'FAILED'}: ${answer}\n`));
        if (!a.ok) failed++;
      }
      if (failed > 0) {
        process.stderr.write(`crs-sync: ${failed} of ${urls.length} receiver(s) did not take the message\n`);
        process.exitCode = 1;
      }
    });

  alerts
    .command('list')
    .description('the incidents, open ones first, then the newest; and messages not delivered yet')
    .option('--json', 'print JSON')
    .option('--limit <n>', 'at most this many incidents (default 100)')
    .action(async (o: { json?: boolean; limit?: string }) => {
      const limit = o.limit === undefined ? 100 : Number(o.limit);
      if (!Number.isInteger(limit) || limit <= 0)
        throw new CrsError('USAGE', '--limit takes a positive whole number');
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1, schema: 'current' });
      try {
        const incidents = await listIncidents(wh.warehouse.db, limit);
        const pending = await pendingDeliveries(wh.warehouse.db);
        const printed = printRows(incidents, {
          json: o.json,
          asJson: { document: { incidents, undelivered: pending } },
          none: 'no incidents',
          head: [
            'state',
            'kind',
            'severity',
            'opened (UTC)',
            'resolved (UTC)',
            'notified',
            'summary',
            'incident',
          ],
          cells: (i) => [
            i.resolvedAt ? 'resolved' : 'open',
            i.kind,
            i.severity,
            utc(i.openedAt),
            utc(i.resolvedAt),
            [i.firingNotifiedAt ? 'firing' : '', i.resolvedNotifiedAt ? 'resolved' : '']
              .filter(Boolean)
              .join(', '),
            i.summary.slice(0, 100),
            i.incident,
          ],
        });
        if (printed === 'table' && pending.length > 0)
          process.stdout.write(
            terminalText(
              `\n${pending.length} message(s) not delivered yet (retried with backoff), e.g. ${pending[0]?.incident} ${pending[0]?.state}: ${pending[0]?.lastError ?? 'not tried yet'}\n`,
            ),
          );
      } finally {
        await wh.close();
      }
    });

  alerts
    .command('settings')
    .description(
      "the deployment's alert settings, which every worker's checks judge by: CRS_FRESHNESS_SLA, " +
        'CRS_ALERT_QUARANTINE_SHARE, CRS_ALERT_BUDGET_WAIT as the first check stored them, beside this ' +
        "configuration's; --store makes this configuration's the deployment's (a changed setting " +
        'takes effect only so)',
    )
    .option('--store', "store this configuration's values as the deployment's")
    .option('--json', 'print JSON')
    .action(async (o: { store?: boolean; json?: boolean }) => {
      const ctx = loadContext();
      const own = alertSettings(ctx.config);
      const wh = await openConfiguredWarehouse(ctx, { connections: 1, schema: 'current' });
      try {
        const before = await readAlertSettings(wh.warehouse.db);
        const stored = o.store ? (await storeAlertSettings(wh.warehouse.db, own)).after : before;
        const differences = stored ? settingDifferences(stored, own) : [];
        if (o.json) {
          process.stdout.write(
            `${JSON.stringify({ stored, before: o.store ? before : undefined, differences }, null, 2)}\n`,
          );
          return;
        }
        process.stdout.write(`${formatSettings(stored, own, o.store ? before : undefined)}\n`);
      } finally {
        await wh.close();
      }
    });

  alerts
    .command('check')
    .description(
      'run one check now, as each worker does every CRS_ALERT_CHECK_INTERVAL: open and resolve ' +
        'incidents, send what is due (for a deployment without a worker, e.g. from cron)',
    )
    .action(async () => {
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1, schema: 'current' });
      try {
        const pass = await runAlertPass(wh.warehouse.db, alertSettings(ctx.config), ctx.log);
        for (const t of pass.transitions) process.stdout.write(terminalText(`${t.state}  ${t.incident}\n`));
        process.stdout.write(`${pass.transitions.length} change(s), ${pass.sent} message(s) sent\n`);
      } finally {
        await wh.close();
      }
    });
}

const SHOWN: { key: keyof JudgedSettings; name: string; show: (v: number) => string }[] = [
  { key: 'freshnessSlaSeconds', name: 'CRS_FRESHNESS_SLA', show: (v) => `${v / 3600}h (${v} s)` },
  { key: 'quarantineShare', name: 'CRS_ALERT_QUARANTINE_SHARE', show: (v) => String(v) },
  { key: 'budgetWaitMs', name: 'CRS_ALERT_BUDGET_WAIT', show: (v) => `${v / 1000}s` },
];

/** The stored settings beside this configuration's, as a table; with --store, what it replaced. */
function formatSettings(
  stored: StoredAlertSettings | null,
  own: JudgedSettings,
  before: StoredAlertSettings | null | undefined,
): string {
  const rows = SHOWN.map((s) => [
    s.name,
    stored ? s.show(stored[s.key]) : '(none yet)',
    s.show(own[s.key]),
    ...(before === undefined ? [] : [before ? s.show(before[s.key]) : '(none)']),
    stored && stored[s.key] !== own[s.key] ? 'differs: the stored one applies' : '',
  ]);
  const head = [
    'setting',
    'stored (applies)',
    'this configuration',
    ...(before === undefined ? [] : ['before']),
    '',
  ];
  const since = stored
    ? `\nfirst check ${utc(stored.startedAt)} UTC`
    : "\nno check has run yet: the first one stores its configuration's";
  return `${renderTable(head, rows)}${since}`;
}
