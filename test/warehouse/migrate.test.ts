import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openWarehouse } from '../../src/warehouse/db.ts';
import { migrateToLatest } from '../../src/warehouse/migrator.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

// The data schema holds the data, the ledger BI reads, the rollups and the migrator's own tables;
// everything else is bookkeeping, in the internal schema (migration 2026-11-28T21-00-00), where a
// reader role cannot look. A new table lands in the data schema unless its migration says
// otherwise: this list makes that a decision.
const DATA_TABLES = [
  'analytics_messages',
  'artifacts',
  'citations',
  'kysely_migration',
  'kysely_migration_lock',
  'rollup_citation_daily',
  'rollup_citation_sources',
  'rollup_citation_thread_days',
  'rollup_citation_threads',
  'rollup_citation_type_daily',
  'rollup_daily',
  'rollup_thread_daily',
  'rollup_thread_firsts',
  'rollup_threads',
  'rollup_user_daily',
  'rollup_user_threads',
  'rollup_users',
  'sync_days',
  'sync_runs',
  'thread_messages',
  'threads',
];
const INTERNAL_TABLES = [
  'held_deletes',
  'load_seen',
  'privacy_suppressions',
  'rate_budget',
  'rejected_records',
];

describe('migrate', () => {
  let tw: TestWarehouse;
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when four migrators start at once on an empty schema, then all succeed and every table exists once', async () => {
    tw = await createTestWarehouse({ migrate: false });
    const others = [0, 1, 2].map(() => openWarehouse({ url: tw.url, schema: tw.schema, max: 2 }));
    try {
      const results = await Promise.all([tw.w, ...others].map((w) => migrateToLatest(w)));
      const applied = results.flatMap((r) => r.applied);
      // Exactly one runner applied each migration; the others found nothing to do.
      expect(new Set(applied).size).toBe(applied.length);
      expect(applied.length).toBeGreaterThan(0);
    } finally {
      await Promise.all(others.map((w) => w.close()));
    }
    const tables = async (schema: string) =>
      (
        await sql<{ table_name: string }>`
          select table_name from information_schema.tables
           where table_schema = ${schema} and table_type = 'BASE TABLE' order by 1`.execute(tw.w.db)
      ).rows.map((r) => r.table_name);
    expect(await tables(tw.schema)).toEqual(DATA_TABLES);
    const internal = await tables(`${tw.schema}_internal`);
    for (const t of INTERNAL_TABLES) expect(internal).toContain(t);
  });

  it('when migrate runs again, then it applies nothing', async () => {
    const again = await migrateToLatest(tw.w);
    expect(again.applied).toEqual([]);
    expect(again.alreadyApplied).toBeGreaterThan(0);
  });
});
