import { errorMessage } from '../errors.ts';
import type { Logger } from '../log.ts';
import { syncIncidents, type Transition } from '../warehouse/incidents.ts';
import type { Freshness } from '../warehouse/read/freshness.ts';
import { storeFreshnessSla } from '../warehouse/read/freshness.ts';
import type { Executor } from '../warehouse/types.ts';
import { ALERT_KINDS, type CheckSettings, evaluateConditions } from './checks.ts';
import { deliverDue } from './sender.ts';
import { targetOf } from './webhook.ts';

export interface AlertSettings extends CheckSettings {
  urls: readonly string[];
  timeoutMs: number;
  checkIntervalMs: number;
}

/** The alert settings of a configuration. */
export function alertSettings(cfg: {
  freshnessSlaSeconds: number;
  openDayStaleAfterSeconds?: number;
  alerts: {
    webhookUrls: readonly string[];
    quarantineShare: number;
    checkIntervalMs: number;
    timeoutMs: number;
    budgetWaitMs: number;
  };
}): AlertSettings {
  return {
    freshnessSlaSeconds: cfg.freshnessSlaSeconds,
    ...(cfg.openDayStaleAfterSeconds !== undefined
      ? { openDayStaleAfterSeconds: cfg.openDayStaleAfterSeconds }
      : {}),
    quarantineShare: cfg.alerts.quarantineShare,
    budgetWaitMs: cfg.alerts.budgetWaitMs,
    urls: cfg.alerts.webhookUrls,
    timeoutMs: cfg.alerts.timeoutMs,
    checkIntervalMs: cfg.alerts.checkIntervalMs,
  };
}

export interface AlertPass {
  transitions: Transition[];
  sent: number;
  freshness: Freshness;
}

/** One check: incidents opened and resolved in the warehouse, then what is due sent. */
export async function runAlertPass(db: Executor, s: AlertSettings, log: Logger): Promise<AlertPass> {
  await storeFreshnessSla(db, s.freshnessSlaSeconds);
  const { conditions, freshness, resolutions } = await evaluateConditions(db, s);
  const transitions = await syncIncidents(db, ALERT_KINDS, conditions, s.urls.map(targetOf), resolutions);
  for (const t of transitions) log.info({ incident: t.incident, state: t.state }, 'alert incident');
  const sent = await deliverDue(db, { urls: s.urls, timeoutMs: s.timeoutMs, log });
  return { transitions, sent, freshness };
}

/**
 * Runs `runAlertPass` every `checkIntervalMs` in the background of a worker, never two at once. It
 * never throws into its host: a failed pass (the warehouse away, a receiver down) is logged and
 * the next one tries again. The timer does not keep the process alive.
 */
export function startAlertMonitor(db: Executor, s: AlertSettings, log: Logger): { stop(): Promise<void> } {
  let running: Promise<void> | null = null;
  let stopped = false;
  const tick = () => {
    if (running || stopped) return;
    running = runAlertPass(db, s, log)
      .then(
        () => undefined,
        (err) => log.warn({ error: errorMessage(err) }, 'alert check failed; the next one tries again'),
      )
      .finally(() => {
        running = null;
      });
  };
  const timer = setInterval(tick, s.checkIntervalMs);
  timer.unref();
  tick();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
