import type { Logger } from '../log.ts';
import { claimDelivery, markDelivered, markUndelivered } from '../warehouse/incidents.ts';
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
}

/**
 * Sends the deliveries due to the configured receivers, one at a time: claimed in the warehouse
 * with a lease longer than the timeout, so no other worker sends the same one meanwhile, and a
 * sender killed mid-send leaves it to be sent again after the lease (at least once; receivers
 * deduplicate by `event.incident` and `event.state`). Returns how many were sent.
 */
export async function deliverDue(db: Executor, o: DeliverOptions): Promise<number> {
  const byTarget = new Map(o.urls.map((u) => [targetOf(u), u]));
  const leaseMs = o.timeoutMs * 2 + 5_000;
  let sent = 0;
  for (let n = 0; n < (o.max ?? 100); n++) {
    const d = await claimDelivery(db, [...byTarget.keys()], leaseMs);
    if (!d) break;
    const url = byTarget.get(d.target) as string;
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
    );
    const target = describeTarget(url);
    if (answer.ok) {
      await markDelivered(db, d, answer.status);
      sent++;
      o.log.info({ incident: d.incident, state: d.state, target }, 'alert sent');
      for (const l of listeners) l({ kind: d.kind, state: d.state, severity: d.severity });
    } else {
      const retryInMs = retryDelayMs(d.attempts);
      await markUndelivered(db, d, { status: answer.status, error: answer.error, retryInMs });
      o.log.warn(
        { incident: d.incident, state: d.state, target, error: answer.error, retryInS: retryInMs / 1000 },
        'alert not delivered; retried later',
      );
    }
  }
  return sent;
}
