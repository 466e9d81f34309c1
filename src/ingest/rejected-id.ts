/**
 * SQL: the message id (uuid) of a quarantined line `r` (a `rejected_records` row), or null when it
 * cannot be read. The loader reads it from the whole line, also past the prefix `raw` keeps of an
 * over-long one (line-fields.ts). Such a line is in the source, just unreadable: its row is not
 * deleted for its absence, and a held delete of it is taken back (held-seen.ts). The one place
 * that says how a reject's id is found; every query of the delete step uses it.
 */
export const REJECTED_ID = 'r.message_id';
