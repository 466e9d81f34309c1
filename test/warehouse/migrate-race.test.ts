import { randomBytes } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { openWarehouse } from '../../src/warehouse/db.ts';
import { dropSchema, migrateToLatest } from '../../src/warehouse/migrator.ts';

/**
 * Kysely's migrator lists every table of every schema to find its own; that listing used to fail
 * ("schema … does not exist") when another schema was dropped at the same moment, which test runs
 * and demos do all the time.
 */
describe('migrations while other schemas come and go', () => {
  it('when schemas with tables are created and dropped during a migration, then the migration still succeeds', async () => {
    const url = inject('databaseUrl');
    const churn = openWarehouse({ url, schema: 'public', max: 2 });
    let stop = false;
    let churned = 0;
    const churner = (async () => {
      while (!stop) {
        const s = `race_${randomBytes(4).toString('hex')}`;
        await churn.pool.query(`create schema "${s}"; create table "${s}".t (id serial primary key, v text)`);
        await churn.pool.query(`drop schema "${s}" cascade`);
        churned++;
      }
    })();
    const results: number[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        const w = openWarehouse({ url, schema: `mrace_${randomBytes(4).toString('hex')}`, max: 2 });
        try {
          const r = await migrateToLatest(w);
          results.push(r.applied.length);
        } finally {
          await dropSchema(w).catch(() => {});
          await w.close();
        }
      }
    } finally {
      stop = true;
      await churner;
      await churn.close();
    }
    expect(churned).toBeGreaterThan(0);
    expect(results.every((n) => n > 0)).toBe(true);
  });
});
