import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openWarehouse } from '../../src/warehouse/db.ts';
import { migrateToLatest } from '../../src/warehouse/migrator.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

const EXPECTED_TABLES = [
  'analytics_messages',
  'artifacts',
  'citations',
  'rejected_records',
  'sync_days',
  'sync_runs',
  'thread_messages',
  'threads',
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
    const rows = await sql<{ table_name: string }>`
      select table_name from information_schema.tables where table_schema = ${tw.schema} order by 1`.execute(
      tw.w.db,
    );
    const names = rows.rows.map((r) => r.table_name);
    for (const t of EXPECTED_TABLES) expect(names).toContain(t);
  });

  it('when migrate runs again, then it applies nothing', async () => {
    const again = await migrateToLatest(tw.w);
    expect(again.applied).toEqual([]);
    expect(again.alreadyApplied).toBeGreaterThan(0);
  });
});
