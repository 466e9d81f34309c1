import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ALERT_KINDS, pipelineMetricsText, seriesNamesOf } from '../../src/metrics/pipeline.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const rulesFile = path.join(root, 'deploy', 'prometheus', 'crs-sync-rules.yml');
const rulesTests = path.join(root, 'test', 'metrics', 'crs-sync-rules.test.yml');

interface Rule {
  alert: string;
  expr: string;
  labels: Record<string, string>;
}
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

  it('when the series the rules name are compared with what a worker exports, then every one is exported', async () => {
    const named = new Set(rules().flatMap((r) => [...r.expr.matchAll(/\bcrs_sync_\w+/g)].map((m) => m[0])));
    expect(named.size).toBeGreaterThanOrEqual(8);
    const exported = seriesNamesOf(await pipelineMetricsText());
    expect([...named].filter((n) => !exported.includes(n))).toEqual([]);
  });
});
