import { errorMessage } from '../errors.ts';
import type { Logger } from '../log.ts';
import {
  adoptAlertSettings,
  type StoredAlertSettings,
  settingDifferences,
} from '../warehouse/alert-settings.ts';
import { syncIncidents, type Transition } from '../warehouse/incidents.ts';
import type { Freshness } from '../warehouse/read/index.ts';
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
  /** What the checks judged by: the deployment's stored settings. */
  judgedBy: StoredAlertSettings;
}

/** One process's checker: its settings, and the differences from the stored ones it warned of. */
export interface AlertChecker {
  /**
   * One check: incidents opened and resolved in the warehouse, then what is due sent. `signal`
   * cuts the sends in flight (their messages released); after `draining`, none is taken up.
   */
  pass(signal?: AbortSignal, draining?: AbortSignal): Promise<AlertPass>;
}

/**
 * A checker for one process. Its checks judge by the deployment's stored settings (the first
 * check's, or `crs-sync alerts settings --store`), never its own: a setting of its own that
 * differs is warned of once, naming the setting, the stored value and its own.
 */
export function createAlertChecker(db: Executor, s: AlertSettings, log: Logger): AlertChecker {
  const warned = new Set<string>();
  return {
    async pass(signal, draining) {
      const stored = await adoptAlertSettings(db, s);
      for (const d of settingDifferences(stored, s)) {
        const key = `${d.setting}=${d.stored}/${d.own}`;
        if (warned.has(key)) continue;
        warned.add(key);
        log.warn(
          { ...d, unit: SETTING_UNITS[d.setting] },
          `${d.setting} differs from the deployment's stored setting: alerts and freshness judge by the stored one (crs-sync alerts settings --store makes this configuration's the stored one)`,
        );
      }
      // The open day's staleness limit is the process's own (CRS_OPEN_DAY_STALE_AFTER): not stored.
      const judged =
        s.openDayStaleAfterSeconds === undefined
          ? stored
          : { ...stored, openDayStaleAfterSeconds: s.openDayStaleAfterSeconds };
      const { conditions, freshness, resolutions } = await evaluateConditions(db, judged);
      const transitions = await syncIncidents(db, ALERT_KINDS, conditions, s.urls.map(targetOf), resolutions);
      for (const t of transitions) log.info({ incident: t.incident, state: t.state }, 'alert incident');
      const sent = await deliverDue(db, {
        urls: s.urls,
        timeoutMs: s.timeoutMs,
        log,
        ...(signal ? { signal } : {}),
        ...(draining ? { draining } : {}),
      });
      return { transitions, sent, freshness, judgedBy: stored };
    },
  };
}

const SETTING_UNITS: Readonly<Record<string, string>> = {
  CRS_FRESHNESS_SLA: 'seconds',
  CRS_ALERT_QUARANTINE_SHARE: 'share',
  CRS_ALERT_BUDGET_WAIT: 'ms',
};

/** One check with a checker of its own (`crs-sync alerts check`). */
export function runAlertPass(db: Executor, s: AlertSettings, log: Logger): Promise<AlertPass> {
  return createAlertChecker(db, s, log).pass();
}

/**
 * How long a stopping monitor lets the messages in flight finish: then they are cut off and
 * released (due again at once, for another worker or the next start), and `stop` returns.
 */
export const ALERT_STOP_GRACE_MS = 5_000;
/** After the cut, how long a stopping monitor waits for the outcomes to be recorded. */
const RECORD_GRACE_MS = 1_000;

/**
 * Runs a check every `checkIntervalMs` in the background of a worker, never two at once. It
 * never throws into its host: a failed check (the warehouse away, a receiver down) is logged and
 * the next one tries again. The timer does not keep the process alive. `stop` waits for a check
 * in progress at most `stopGraceMs` (ALERT_STOP_GRACE_MS), then cuts its sends off and waits at
 * most a second more for their messages to be released.
 */
export function startAlertMonitor(
  db: Executor,
  s: AlertSettings,
  log: Logger,
  opts: { stopGraceMs?: number } = {},
): { stop(): Promise<void> } {
  const checker = createAlertChecker(db, s, log);
  const draining = new AbortController();
  const stopping = new AbortController();
  let running: Promise<void> | null = null;
  let stopped: Promise<void> | null = null;
  const tick = () => {
    if (running || draining.signal.aborted) return;
    running = checker
      .pass(stopping.signal, draining.signal)
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
  const stop = async () => {
    clearInterval(timer);
    draining.abort();
    const pass = running;
    if (!pass) {
      stopping.abort('the worker stopped before the receiver answered');
      return;
    }
    const grace = opts.stopGraceMs ?? ALERT_STOP_GRACE_MS;
    let timeout: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((r) => {
      timeout = setTimeout(r, grace);
    });
    await Promise.race([pass, graceOver]);
    clearTimeout(timeout);
    stopping.abort('the worker stopped before the receiver answered');
    // Cut off: what is left is recording the outcomes, a few statements; a warehouse that does not
    // answer them leaves the leases to run out instead.
    await Promise.race([pass, new Promise<void>((r) => setTimeout(r, RECORD_GRACE_MS).unref())]);
  };
  return {
    stop() {
      stopped ??= stop();
      return stopped;
    },
  };
}
