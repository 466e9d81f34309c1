import type { Logger } from '../log.ts';
import {
  type ClaimedDelivery,
  claimDelivery,
  markDelivered,
  markUndelivered,
  readdressDeliveries,
  releaseDelivery,
} from '../warehouse/incidents.ts';
import type { AlertState, Executor } from '../warehouse/types.ts';
import { alertPayload } from './message.ts';
import { describeTarget, postWebhook, targetOf } from './webhook.ts';

/** What the metrics count: one message a receiver took. */
export interface AlertSent {
  kind: string;
  state: AlertState;
  severity: string;
}

const listeners = new Set<(e: AlertSent) => void>();

/** Calls `listener` for every message a receiver took in this process; returns the unsubscribe. */
export function onAlertSent(listener: (e: AlertSent) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Retry after 30 s, doubling per attempt, at most an hour. */
export function retryDelayMs(attempts: number): number {
  return Math.min(3_600_000, 30_000 * 2 ** Math.max(0, attempts - 1));
}

export interface DeliverOptions {
  urls: readonly string[];
  timeoutMs: number;
  log: Logger;
  /** Most messages sent in one call (the rest wait for the next check). */
  max?: number;
  /** Messages in flight at once (default DELIVERY_CONCURRENCY). */
  concurrency?: number;
  /** Aborted when the sender stops (a worker's shutdown): sends in flight are cut, their messages released. */
  signal?: AbortSignal;
  /** Aborted when the sender begins to stop: no message is taken up after it. */
  draining?: AbortSignal;
}

/** Messages one check posts at once, over all its receivers. */
export const DELIVERY_CONCURRENCY = 8;

/**
 * Sends the deliveries due to the configured receivers, up to `concurrency` at once, each claimed
 * in the warehouse with a lease longer than the timeout, so no other worker sends the same one
 * meanwhile, and a sender killed mid-send leaves it to be sent again after the lease (at least
 * once; receivers deduplicate by `event.incident` and `event.state`).
 *
 * One deadline per call: messages are taken up for `timeoutMs` (CRS_ALERT_TIMEOUT) from the start,
 * each cut off `timeoutMs` after it was posted, so a call ends within twice the timeout however
 * many messages are due and however many receivers hang; what it did not take up waits for the
 * next check. First, messages to receivers no longer configured go to the configured ones
 * (`readdressDeliveries`). Returns how many were sent.
 */
export async function deliverDue(db: Executor, o: DeliverOptions): Promise<number> {
  const byTarget = new Map(o.urls.map((u) => [targetOf(u), u]));
  const targets = [...byTarget.keys()];
  const moved = await readdressDeliveries(db, targets);
  if (moved > 0)
    o.log.info(
      { messages: moved, receivers: o.urls.map(describeTarget) },
      'alert messages to receivers no longer configured go to the configured ones',
    );
  const leaseMs = o.timeoutMs * 2 + 5_000;
  const takeUntil = Date.now() + o.timeoutMs;
  const max = o.max ?? 100;
  let taken = 0;
  let sent = 0;
  const slot = async () => {
    while (taken < max && Date.now() < takeUntil && !o.signal?.aborted && !o.draining?.aborted) {
      taken++;
      const d = await claimDelivery(db, targets, leaseMs);
      if (!d) return;
      if (await sendOne(db, d, byTarget.get(d.target) as string, o)) sent++;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, o.concurrency ?? DELIVERY_CONCURRENCY) }, slot));
  return sent;
}

/** Posts one claimed message and records the outcome; true when the receiver took it. */
async function sendOne(db: Executor, d: ClaimedDelivery, url: string, o: DeliverOptions): Promise<boolean> {
  const answer = await postWebhook(
    url,
    alertPayload({
      kind: d.kind,
      severity: d.severity,
      summary: d.summary,
      incident: d.incident,
      state: d.state,
      opened_at: d.openedAt,
      resolved_at: d.resolvedAt,
      details: d.details,
    }),
    o.timeoutMs,
    o.signal,
  );
  const target = describeTarget(url);
  if (answer.ok) {
    await markDelivered(db, d, answer.status);
    o.log.info({ incident: d.incident, state: d.state, target }, 'alert sent');
    for (const l of listeners) l({ kind: d.kind, state: d.state, severity: d.severity });
    return true;
  }
  if (o.signal?.aborted) {
    // Our stop, not the receiver's failure: due again now, for the next sender.
    await releaseDelivery(db, d);
    o.log.info({ incident: d.incident, state: d.state, target }, 'alert not sent: the sender stopped');
    return false;
  }
  const retryInMs = retryDelayMs(d.attempts);
  await markUndelivered(db, d, { status: answer.status, error: answer.error, retryInMs });
  o.log.warn(
    { incident: d.incident, state: d.state, target, error: answer.error, retryInS: retryInMs / 1000 },
    'alert not delivered; retried later',
  );
  return false;
}
