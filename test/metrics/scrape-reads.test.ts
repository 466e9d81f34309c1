import { afterEach, describe, expect, it } from 'vitest';
import { pipelineMetricsText, setWarehouseReader, type WarehouseGauges } from '../../src/metrics/pipeline.ts';

const gauges: WarehouseGauges = {
  days: { complete: 3, failed: 1 },
  deletesHeld: 7,
  quarantineOpen: [{ source: 'export', code: 'SCHEMA_INVALID', lines: 2 }],
  enrichBacklog: 4,
  enrichOldestPendingSeconds: 60,
  exportAgeSeconds: 30 * 3600,
  openDayPullAgeSeconds: 900,
  dayRejectedShareMax: 0.002,
  budgetPausedSeconds: 0,
};

const line = (text: string, start: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith(start))
    .join('\n');

describe('gauges read from the warehouse at scrape time', () => {
  afterEach(() => setWarehouseReader(undefined));

  it('when the warehouse read fails, then its gauges are left out of the scrape rather than shown as 0', async () => {
    const errors: unknown[] = [];
    setWarehouseReader(() => Promise.reject(new Error('connection refused')), {
      onError: (e) => errors.push(e),
    });
    const text = await pipelineMetricsText();
    expect(line(text, 'crs_sync_deletes_held ')).toBe('');
    expect(line(text, 'crs_sync_days{')).toBe('');
    expect(line(text, 'crs_sync_enrich_backlog_threads ')).toBe('');
    expect(line(text, 'crs_sync_freshness_age_seconds{')).toBe('');
    expect(errors.length).toBeGreaterThan(0);
    // The counters are still there: a scrape without the warehouse is not an empty scrape.
    expect(text).toContain('crs_sync_rows_total{source="export",outcome="inserted"}');
  });

  it('when the read answers, then the gauges show it, and the default freshness is late past 26 h', async () => {
    setWarehouseReader(async () => gauges);
    const text = await pipelineMetricsText();
    expect(line(text, 'crs_sync_deletes_held ')).toBe('crs_sync_deletes_held 7');
    expect(line(text, 'crs_sync_days{status="failed"}')).toBe('crs_sync_days{status="failed"} 1');
    expect(line(text, 'crs_sync_days{status="running"}')).toBe('crs_sync_days{status="running"} 0');
    expect(line(text, 'crs_sync_quarantine_open_lines{')).toBe(
      'crs_sync_quarantine_open_lines{source="export",code="SCHEMA_INVALID"} 2',
    );
    expect(line(text, 'crs_sync_freshness_state{source="export",state="late"}')).toBe(
      'crs_sync_freshness_state{source="export",state="late"} 1',
    );
    expect(line(text, 'crs_sync_freshness_state{source="enrichment",state="on_time"}')).toBe(
      'crs_sync_freshness_state{source="enrichment",state="on_time"} 1',
    );
    // The measures of quarantine_spike and budget_starved, which the Prometheus rules compare.
    expect(line(text, 'crs_sync_day_rejected_share_max ')).toBe('crs_sync_day_rejected_share_max 0.002');
    expect(line(text, 'crs_sync_budget_paused_seconds ')).toBe('crs_sync_budget_paused_seconds 0');
  });

  it('when a day was pulled intraday, then the open-day gauge shows its last pull’s age, and with none it is absent rather than 0', async () => {
    setWarehouseReader(async () => gauges);
    const text = await pipelineMetricsText();
    expect(line(text, 'crs_sync_open_day_pull_age_seconds ')).toBe('crs_sync_open_day_pull_age_seconds 900');
    expect(line(text, 'crs_sync_days{status="partial"}')).toBe('crs_sync_days{status="partial"} 0');
    // The export's freshness stays that of the complete days: 30 h, late.
    expect(line(text, 'crs_sync_freshness_age_seconds{source="export"}')).toBe(
      'crs_sync_freshness_age_seconds{source="export"} 108000',
    );

    setWarehouseReader(async () => ({ ...gauges, openDayPullAgeSeconds: null }));
    const none = await pipelineMetricsText();
    expect(line(none, 'crs_sync_open_day_pull_age_seconds')).toBe('');
    expect(none).toContain('# TYPE crs_sync_open_day_pull_age_seconds gauge');
    expect(line(none, 'crs_sync_deletes_held ')).toBe('crs_sync_deletes_held 7');
  });

  it('when scrapes come close together, then the warehouse is read once for them', async () => {
    let reads = 0;
    setWarehouseReader(async () => {
      reads++;
      return gauges;
    });
    await pipelineMetricsText();
    await pipelineMetricsText();
    await pipelineMetricsText();
    expect(reads).toBe(1);
  });
});
