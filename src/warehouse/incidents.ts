import { sql } from 'kysely';
import type { AlertSeverity, AlertState, Executor } from './types.ts';

/**
 * Alert incidents and their deliveries (`alert_incidents`, `alert_deliveries`). Every worker runs
 * the same checks; the warehouse decides which one opens, resolves and sends, so an incident is
 * announced once whatever the number of workers and restarts:
 * - an incident opens with `insert … on conflict do nothing` against the one open incident per key;
 * - it resolves with an update of the open row (the first worker to do it gets the row back);
 * - a delivery is claimed with `for update skip locked` and a lease, and marked sent after.
 */

/** A condition an alert check found true now. */
export interface Condition {
  /** What the condition is about, stable while it lasts: `day_failed:2026-11-20`. */
  key: string;
  kind: string;
  severity: AlertSeverity;
  summary: string;
  details: Record<string, unknown>;
}

export interface Incident {
  incident: string;
  key: string;
  kind: string;
  severity: AlertSeverity;
  summary: string;
  details: Record<string, unknown>;
  openedAt: string;
  resolvedAt: string | null;
  firingNotifiedAt: string | null;
  resolvedNotifiedAt: string | null;
}

/** An incident that changed state in this check: the messages to enqueue. */
export interface Transition {
  incident: string;
  state: AlertState;
}

/**
 * Brings the incidents of `kinds` in line with `conditions`: a condition without an open
 * incident opens one, an open incident of those kinds whose condition is gone resolves, with what
 * resolved it (`resolutions`, by key) merged into its details. Only the transitions this caller
 * made are returned, each with a delivery row per target enqueued.
 */
export async function syncIncidents(
  db: Executor,
  kinds: readonly string[],
  conditions: readonly Condition[],
  targets: readonly string[],
  resolutions: Readonly<Record<string, Record<string, unknown>>> = {},
): Promise<Transition[]> {
  const out: Transition[] = [];
  for (const c of conditions) {
    const r = await sql<{ incident: string }>`
      insert into alert_incidents (incident, key, kind, severity, summary, details)
      values (${c.key} || '@' || to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
              ${c.key}, ${c.kind}, ${c.severity}, ${c.summary}, ${JSON.stringify(c.details)})
      on conflict (key) where resolved_at is null do nothing
      returning incident`.execute(db);
    const opened = r.rows[0];
    if (opened) out.push({ incident: opened.incident, state: 'firing' });
    // What `alerts list` and a message not sent yet say is the condition as it is now.
    else
      await db
        .updateTable('alert_incidents')
        .set({
          last_seen_at: sql`now()`,
          summary: c.summary,
          details: sql`${JSON.stringify(c.details)}::jsonb`,
        })
        .where('key', '=', c.key)
        .where('resolved_at', 'is', null)
        .execute();
  }
  if (kinds.length > 0) {
    const keys = conditions.map((c) => c.key);
    let q = db
      .updateTable('alert_incidents')
      .set({
        resolved_at: sql`now()`,
        details: sql`alert_incidents.details || coalesce(${JSON.stringify(resolutions)}::jsonb -> alert_incidents.key, '{}'::jsonb)`,
      })
      .where('resolved_at', 'is', null)
      .where('kind', 'in', [...kinds]);
    if (keys.length > 0) q = q.where('key', 'not in', keys);
    const resolved = await q.returning('incident').execute();
    for (const r of resolved) out.push({ incident: r.incident, state: 'resolved' });
  }
  await enqueueDeliveries(db, out, targets);
  return out;
}

/** One delivery row per transition and target (a second enqueue of the same is a no-op). */
export async function enqueueDeliveries(
  db: Executor,
  transitions: readonly Transition[],
  targets: readonly string[],
): Promise<void> {
  const rows = transitions.flatMap((t) => targets.map((target) => ({ ...t, target })));
  if (rows.length === 0) return;
  await db
    .insertInto('alert_deliveries')
    .values(rows)
    .onConflict((oc) => oc.columns(['incident', 'state', 'target']).doNothing())
    .execute();
}

/**
 * Receivers rotated (a leaked webhook URL replaced): every message not sent yet to a receiver not
 * among `targets` (a digest no longer configured) goes to each of `targets` instead, due now,
 * unless that receiver has the message already; one being sent (claimed) is left to its sender.
 * Moved, not copied: workers configured apart during a rolling change move a message between
 * their receivers, and whichever sends it first sends it once. Returns how many were moved.
 */
export async function readdressDeliveries(db: Executor, targets: readonly string[]): Promise<number> {
  if (targets.length === 0) return 0;
  const r = await sql<{ n: number }>`
    with gone as (
      delete from alert_deliveries d
       where d.sent_at is null and d.target <> all(${[...targets]}::text[])
         and (d.claimed_until is null or d.claimed_until <= now())
      returning d.incident, d.state, d.created_at
    ), moved as (
      insert into alert_deliveries (incident, state, target, created_at)
      select distinct g.incident, g.state, t.target, g.created_at
        from gone g cross join unnest(${[...targets]}::text[]) as t(target)
      on conflict (incident, state, target) do nothing
      returning 1
    )
    select (select count(*) from gone)::int as n, (select count(*) from moved)::int as added`.execute(db);
  return Number(r.rows[0]?.n ?? 0);
}

/** A delivery claimed for sending, with its incident. */
export interface ClaimedDelivery extends Incident {
  state: AlertState;
  target: string;
  attempts: number;
}

/**
 * Claims the next due delivery to one of `targets` for `leaseMs`: nobody else sends it until the
 * lease runs out. A `resolved` message waits for its `firing` one to the same target.
 */
export async function claimDelivery(
  db: Executor,
  targets: readonly string[],
  leaseMs: number,
): Promise<ClaimedDelivery | null> {
  if (targets.length === 0) return null;
  const r = await sql<IncidentRow & { state: AlertState; target: string; attempts: number }>`
    with due as (
      select d.incident, d.state, d.target from alert_deliveries d
      where d.sent_at is null and d.next_attempt_at <= now()
        and (d.claimed_until is null or d.claimed_until <= now())
        and d.target = any(${[...targets]}::text[])
        and (d.state = 'firing' or not exists (
          select 1 from alert_deliveries f
          where f.incident = d.incident and f.target = d.target and f.state = 'firing' and f.sent_at is null))
      order by d.created_at, d.state
      limit 1
      for update skip locked
    ), claimed as (
      update alert_deliveries d
         set claimed_until = now() + ${leaseMs} * interval '1 millisecond', attempts = d.attempts + 1
        from due
       where d.incident = due.incident and d.state = due.state and d.target = due.target
      returning d.incident, d.state, d.target, d.attempts
    )
    select c.state, c.target, c.attempts, ${INCIDENT_COLUMNS}
      from claimed c join alert_incidents i on i.incident = c.incident`.execute(db);
  const row = r.rows[0];
  return row ? { ...toIncident(row), state: row.state, target: row.target, attempts: row.attempts } : null;
}

/** The receiver took it: the delivery is done, and the incident's state notified. */
export async function markDelivered(db: Executor, d: ClaimedDelivery, status: number): Promise<void> {
  await db
    .updateTable('alert_deliveries')
    .set({ sent_at: sql`now()`, claimed_until: null, last_status: status, last_error: null })
    .where('incident', '=', d.incident)
    .where('state', '=', d.state)
    .where('target', '=', d.target)
    .execute();
  const column = d.state === 'firing' ? 'firing_notified_at' : 'resolved_notified_at';
  await db
    .updateTable('alert_incidents')
    .set({ [column]: sql`coalesce(${sql.ref(column)}, now())` })
    .where('incident', '=', d.incident)
    .execute();
}

/** Not sent because this sender stopped (a worker's shutdown): due again now, for any sender. */
export async function releaseDelivery(db: Executor, d: ClaimedDelivery): Promise<void> {
  await db
    .updateTable('alert_deliveries')
    .set({ claimed_until: null, next_attempt_at: sql`now()` })
    .where('incident', '=', d.incident)
    .where('state', '=', d.state)
    .where('target', '=', d.target)
    .execute();
}

/** It failed: retried after `retryInMs`. `error` must carry no secret (never the URL). */
export async function markUndelivered(
  db: Executor,
  d: ClaimedDelivery,
  failure: { status: number | null; error: string; retryInMs: number },
): Promise<void> {
  await db
    .updateTable('alert_deliveries')
    .set({
      claimed_until: null,
      last_status: failure.status,
      last_error: failure.error.slice(0, 500),
      next_attempt_at: sql`now() + ${failure.retryInMs} * interval '1 millisecond'`,
    })
    .where('incident', '=', d.incident)
    .where('state', '=', d.state)
    .where('target', '=', d.target)
    .execute();
}

/** Incidents, open ones first, then the newest (`crs-sync alerts list`). */
export async function listIncidents(db: Executor, limit = 100): Promise<Incident[]> {
  const r = await sql<IncidentRow>`
    select ${INCIDENT_COLUMNS} from alert_incidents i
    order by (i.resolved_at is null) desc, i.opened_at desc, i.incident
    limit ${limit}`.execute(db);
  return r.rows.map(toIncident);
}

/** Deliveries not sent yet, by target (for `crs-sync alerts list`). */
export async function pendingDeliveries(
  db: Executor,
): Promise<
  { incident: string; state: AlertState; target: string; attempts: number; lastError: string | null }[]
> {
  const rows = await db
    .selectFrom('alert_deliveries')
    .select(['incident', 'state', 'target', 'attempts', 'last_error'])
    .where('sent_at', 'is', null)
    .orderBy('created_at')
    .limit(100)
    .execute();
  return rows.map((r) => ({ ...r, lastError: r.last_error }));
}

interface IncidentRow {
  incident: string;
  key: string;
  kind: string;
  severity: AlertSeverity;
  summary: string;
  details: Record<string, unknown>;
  opened_at: Date;
  resolved_at: Date | null;
  firing_notified_at: Date | null;
  resolved_notified_at: Date | null;
}

const INCIDENT_COLUMNS = sql.raw(
  'i.incident, i.key, i.kind, i.severity, i.summary, i.details, i.opened_at, i.resolved_at, ' +
    'i.firing_notified_at, i.resolved_notified_at',
);

const iso = (d: Date | null) => (d ? d.toISOString() : null);

function toIncident(r: IncidentRow): Incident {
  return {
    incident: r.incident,
    key: r.key,
    kind: r.kind,
    severity: r.severity,
    summary: r.summary,
    details: r.details,
    openedAt: r.opened_at.toISOString(),
    resolvedAt: iso(r.resolved_at),
    firingNotifiedAt: iso(r.firing_notified_at),
    resolvedNotifiedAt: iso(r.resolved_notified_at),
  };
}
