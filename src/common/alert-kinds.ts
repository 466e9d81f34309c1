/**
 * The kinds of alert crs-sync raises: the webhook checks decide on them (src/alerts/checks.ts),
 * the metrics count them sent (src/metrics) and the Prometheus rules file has one rule each.
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
