import { type Kysely, sql } from 'kysely';
import type { Database, Executor } from './types.ts';

/**
 * The alert settings of the deployment (`freshness_sla` and `alert_settings`, migration
 * 2026-11-28T11-00-00): what every worker's checks judge by, so that workers configured apart (a
 * rolling deploy of a new CRS_FRESHNESS_SLA) decide the same incidents. The first check stores
 * its configuration's values; later checks adopt what is stored (`adoptAlertSettings`), whatever
 * their own; `crs-sync alerts settings --store` replaces it (`storeAlertSettings`).
 */

/** The settings that decide incidents, as a configuration gives them. */
export interface JudgedSettings {
  /** CRS_FRESHNESS_SLA. */
  freshnessSlaSeconds: number;
  /** CRS_ALERT_QUARANTINE_SHARE. */
  quarantineShare: number;
  /** CRS_ALERT_BUDGET_WAIT. */
  budgetWaitMs: number;
}

/** The setting each judged value comes from, for people. */
export const JUDGED_SETTING_NAMES: Readonly<Record<keyof JudgedSettings, string>> = {
  freshnessSlaSeconds: 'CRS_FRESHNESS_SLA',
  quarantineShare: 'CRS_ALERT_QUARANTINE_SHARE',
  budgetWaitMs: 'CRS_ALERT_BUDGET_WAIT',
};

export interface StoredAlertSettings extends JudgedSettings {
  /** The deployment's first check (ISO): a new deployment's first day is due one SLA after it. */
  startedAt: string;
}

/** A judged setting whose stored value is not this configuration's. */
export interface SettingDifference {
  setting: string;
  stored: number;
  own: number;
}

/**
 * Stores `own` where nothing is stored yet (the deployment's first check), and returns what is
 * stored: from then on every check judges by the first one's values, not its own.
 */
export async function adoptAlertSettings(db: Executor, own: JudgedSettings): Promise<StoredAlertSettings> {
  await sql`insert into freshness_sla (sla_seconds) values (${own.freshnessSlaSeconds})
            on conflict (one) do nothing`.execute(db);
  // A row a migration left without values (a deployment that checked before they were stored).
  await sql`
    insert into alert_settings (quarantine_share, budget_wait_ms) values (${own.quarantineShare}, ${own.budgetWaitMs})
    on conflict (one) do update
      set quarantine_share = coalesce(alert_settings.quarantine_share, excluded.quarantine_share),
          budget_wait_ms = coalesce(alert_settings.budget_wait_ms, excluded.budget_wait_ms)
    where alert_settings.quarantine_share is null or alert_settings.budget_wait_ms is null`.execute(db);
  const stored = await readAlertSettings(db);
  if (!stored) throw new Error('the alert settings were stored but cannot be read back');
  return stored;
}

/** What is stored, or null before the deployment's first check. */
export async function readAlertSettings(db: Executor): Promise<StoredAlertSettings | null> {
  const r = await sql<{
    sla: number | null;
    share: number | null;
    wait: number | null;
    started_at: Date | null;
  }>`
    select (select sla_seconds from freshness_sla) as sla, s.quarantine_share as share,
           s.budget_wait_ms as wait, s.started_at
      from (select 1) one left join alert_settings s on true`.execute(db);
  const row = r.rows[0];
  if (!row || row.sla === null || row.share === null || row.wait === null || row.started_at === null)
    return null;
  return {
    freshnessSlaSeconds: Number(row.sla),
    quarantineShare: Number(row.share),
    budgetWaitMs: Number(row.wait),
    startedAt: row.started_at.toISOString(),
  };
}

/** The SLA freshness is judged by: the stored one, else `fallback` (before any check stored one). */
export async function deploymentFreshnessSla(db: Executor, fallback: number): Promise<number> {
  const r = await db.selectFrom('freshness_sla').select('sla_seconds').executeTakeFirst();
  return r ? Number(r.sla_seconds) : fallback;
}

/** The judged settings where `own` differs from `stored`. */
export function settingDifferences(stored: JudgedSettings, own: JudgedSettings): SettingDifference[] {
  return (Object.keys(JUDGED_SETTING_NAMES) as (keyof JudgedSettings)[])
    .filter((k) => stored[k] !== own[k])
    .map((k) => ({ setting: JUDGED_SETTING_NAMES[k], stored: stored[k], own: own[k] }));
}

/**
 * Makes `own` the deployment's settings (`crs-sync alerts settings --store`); the first check's
 * time stays. Returns what was stored before (null: nothing yet).
 */
export async function storeAlertSettings(
  db: Kysely<Database>,
  own: JudgedSettings,
): Promise<{ before: StoredAlertSettings | null; after: StoredAlertSettings }> {
  return db.transaction().execute(async (tx) => {
    const before = await readAlertSettings(tx);
    await sql`insert into freshness_sla (sla_seconds) values (${own.freshnessSlaSeconds})
              on conflict (one) do update set sla_seconds = excluded.sla_seconds, updated_at = now()`.execute(
      tx,
    );
    await sql`
      insert into alert_settings (quarantine_share, budget_wait_ms) values (${own.quarantineShare}, ${own.budgetWaitMs})
      on conflict (one) do update
        set quarantine_share = excluded.quarantine_share, budget_wait_ms = excluded.budget_wait_ms,
            updated_at = now()`.execute(tx);
    const after = await readAlertSettings(tx);
    if (!after) throw new Error('the alert settings were stored but cannot be read back');
    return { before, after };
  });
}
