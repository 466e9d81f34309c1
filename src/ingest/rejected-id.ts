/**
 * SQL: the message id (uuid) of a quarantined line `r` (a `rejected_records` row), or null when it
 * cannot be read. Such a line is in the source, just unreadable: its row is not deleted for its
 * absence, and a held delete of it is taken back (held-seen.ts). The one place that says how a
 * reject's id is found; every query of the delete step uses it.
 */
export const REJECTED_ID = `substring(r.raw from '"Message ID"\\s*:\\s*"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"')::uuid`;
