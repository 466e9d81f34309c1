/**
 * The kinds of alert crs-sync raises: the webhook checks decide on them (src/alerts/checks.ts),
 * the metrics count them sent (src/metrics) and the Prometheus rules file has one rule each, of
 * the same severity (the table in docs/alerts.md; test/metrics/prometheus-rules.test.ts holds
 * the rules file to it).
 */
export const ALERT_KINDS = [
  'day_failed',
  'open_day_stale',
  'freshness_late',
  'deletes_held',
  'quarantine_spike',
  'schema_drift',
  'enrichment_stalled',
  'budget_starved',
] as const;
export type AlertKind = (typeof ALERT_KINDS)[number];

/** Each kind's severity, the webhook's and the Prometheus rule's. */
export const ALERT_SEVERITY: Readonly<Record<AlertKind, 'critical' | 'warning'>> = {
  day_failed: 'critical',
  freshness_late: 'critical',
  deletes_held: 'warning',
  quarantine_spike: 'warning',
  schema_drift: 'warning',
  enrichment_stalled: 'warning',
  budget_starved: 'warning',
  open_day_stale: 'warning',
};
