import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ALERT_SEVERITY } from '../../src/common/alert-kinds.ts';
import { parseConfig } from '../../src/config.ts';
import { ALERT_KINDS, pipelineMetricsText, seriesNamesOf } from '../../src/metrics/pipeline.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const rulesFile = path.join(root, 'deploy', 'prometheus', 'crs-sync-rules.yml');
const rulesTests = path.join(root, 'test', 'metrics', 'crs-sync-rules.test.yml');
const alertsDoc = path.join(root, 'docs', 'alerts.md');

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
}

interface TableRow {
  kind: string;
  severity: string;
  expr: string;
}

/** docs/alerts.md's table "The alerts and the Prometheus rules": kind, severity, the rule's expression. */
function alertsTable(): TableRow[] {
  const doc = readFileSync(alertsDoc, 'utf8');
  const section = doc.slice(doc.indexOf('## The alerts and the Prometheus rules'));
  const lines = section.split('\n').filter((l) => l.startsWith('| `'));
  return lines.map((l) => {
    // Cells split on the pipes that are not escaped (`\|` in a cell is a pipe of its text).
    const cells = l
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((c) => c.trim().replaceAll('\\|', '|'));
    const code = (c: string) => /^`(.*)`$/.exec(c)?.[1] ?? `(not code: ${c})`;
    return { kind: code(cells[0] ?? ''), severity: cells[1] ?? '', expr: code(cells[3] ?? '') };
  });
}

const oneLine = (expr: string) => expr.replace(/\s+/g, ' ').trim();
const rules = (): Rule[] =>
  (parse(readFileSync(rulesFile, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

/** Debian's `prometheus` package provides promtool (.ci/run installs it); missing, the tests fail. */
function promtool(args: string[]): { status: number | null; output: string } {
  const r = spawnSync('promtool', args, { cwd: root, encoding: 'utf8' });
  if (r.error) throw new Error(`promtool could not run (apt-get install prometheus): ${r.error.message}`);
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

describe('the Prometheus rules shipped in deploy/prometheus (promtool)', () => {
  it('when promtool checks the shipped rules file, then it accepts all eight alerts', () => {
    const r = promtool(['check', 'rules', rulesFile]);
    expect(r.output).toContain('SUCCESS: 8 rules found');
    expect(r.status).toBe(0);
  });

  it('when promtool runs the rules tests, then each alert fires on its condition and clears after it', () => {
    const r = promtool(['test', 'rules', rulesTests]);
    expect(r.output).toContain('SUCCESS');
    expect(r.status).toBe(0);
  });

  it('when the rules are read, then there is one alert for each webhook kind, labelled with it', () => {
    expect(
      rules()
        .map((r) => r.labels.kind)
        .sort(),
    ).toEqual([...ALERT_KINDS].sort());
  });

  it("when the rules are compared with docs/alerts.md's table, then each kind's rule has the table's expression and severity, the webhook's, and no delay", () => {
    const table = alertsTable();
    expect(table.map((r) => r.kind)).toEqual([...ALERT_KINDS]);
    const byKind = new Map(rules().map((r) => [r.labels.kind, r]));
    for (const row of table) {
      const rule = byKind.get(row.kind);
      expect(rule, row.kind).toBeDefined();
      expect(oneLine(rule!.expr), row.kind).toBe(row.expr);
      expect(rule!.labels.severity, row.kind).toBe(row.severity);
      expect(ALERT_SEVERITY[row.kind as keyof typeof ALERT_SEVERITY], row.kind).toBe(row.severity);
      // The webhook opens at the first check that sees the condition: the rule fires as soon.
      expect(rule!.for, row.kind).toBeUndefined();
    }
  });

  it("when the rules' thresholds are read, then they are the defaults of the settings the webhook checks judge by", () => {
    const defaults = parseConfig({}).alerts;
    const expr = (kind: string) => oneLine(rules().find((r) => r.labels.kind === kind)?.expr ?? '');
    expect(expr('quarantine_spike')).toBe(
      `max(crs_sync_day_rejected_share_max) > ${defaults.quarantineShare}`,
    );
    expect(expr('budget_starved')).toBe(
      `max(crs_sync_budget_paused_seconds) > ${defaults.budgetWaitMs / 1000}`,
    );
    // Freshness has no threshold in the rules: the workers export the state judged by the stored SLA.
    expect(expr('freshness_late')).not.toMatch(/\d{3,}/);
  });

  it('when the series the rules name are compared with what a worker exports, then every one is exported', async () => {
    const named = new Set(rules().flatMap((r) => [...r.expr.matchAll(/\bcrs_sync_\w+/g)].map((m) => m[0])));
    expect(named.size).toBeGreaterThanOrEqual(6);
    const exported = seriesNamesOf(await pipelineMetricsText());
    expect([...named].filter((n) => !exported.includes(n))).toEqual([]);
  });
});
