import type { AlertState } from '../warehouse/types.ts';

/** The first command to run for each kind of alert (docs/alerts.md says more). */
export const FIRST_COMMAND: Readonly<Record<string, string>> = {
  day_failed: 'crs-sync status',
  open_day_stale: 'crs-sync status',
  freshness_late: 'crs-sync status',
  deletes_held: 'crs-sync deletes list',
  quarantine_spike: 'crs-sync rejects list',
  schema_drift: 'crs-sync schema changes',
  enrichment_stalled: 'crs-sync status',
  budget_starved: 'crs-sync status',
  test: 'crs-sync alerts list',
};

export interface AlertEvent {
  kind: string;
  severity: string;
  summary: string;
  /** The incident's stable id: a `firing` and its `resolved` carry the same one. */
  incident: string;
  state: AlertState;
  /** When the incident opened, and for `resolved` when it cleared. */
  opened_at: string;
  resolved_at: string | null;
  first_command: string;
  details: Record<string, unknown>;
}

/** The JSON posted: `text` for Slack-compatible receivers, `event` for everything else. */
export interface AlertPayload {
  text: string;
  event: AlertEvent;
}

/**
 * Text for Slack-style markup: `&`, `<` and `>` escaped, so that text from the data (a field name,
 * an error) is shown as it is, never read as a mention (`<!channel>`) or a link (`<url|label>`).
 */
export function escapeMarkup(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

/**
 * The message: `text` with what comes from the data escaped (`escapeMarkup`); `event` as it is
 * (JSON). A `resolved` message says what resolved the incident (its details' `resolution`, written
 * when it resolved) rather than repeating the failure; the failure's summary stays in
 * `event.details.summary`.
 */
export function alertPayload(e: Omit<AlertEvent, 'first_command'>): AlertPayload {
  const first = FIRST_COMMAND[e.kind] ?? 'crs-sync alerts list';
  const mark = e.state === 'firing' ? `[${e.severity.toUpperCase()}] firing` : '[RESOLVED]';
  const resolution = e.state === 'resolved' ? e.details.resolution : undefined;
  const event =
    typeof resolution === 'string'
      ? { ...e, summary: resolution, details: { ...e.details, summary: e.summary } }
      : e;
  return {
    text: `crs-sync ${mark} ${escapeMarkup(e.kind)}: ${escapeMarkup(event.summary)}${e.state === 'firing' ? ` (first: \`${first}\`)` : ''}`,
    event: { ...event, first_command: first },
  };
}
