import { randomBytes } from 'node:crypto';
import { openWarehouse, type Warehouse } from '../../src/warehouse/db.ts';
import { dropSchema, migrateToLatest } from '../../src/warehouse/migrator.ts';
import { provided } from './tier.ts';

export interface TestWarehouse {
  readonly w: Warehouse;
  readonly url: string;
  readonly schema: string;
  /** Drops the schema and closes the pool. */
  dispose(): Promise<void>;
}

/** A fresh, migrated schema of its own on the run's Postgres, so test files never share rows. */
export async function createTestWarehouse(
  opts: { migrate?: boolean; prefix?: string } = {},
): Promise<TestWarehouse> {
  const url = provided('databaseUrl');
  const schema = `${opts.prefix ?? 't'}_${randomBytes(5).toString('hex')}`;
  const w = openWarehouse({ url, schema, max: 10 });
  if (opts.migrate !== false) await migrateToLatest(w);
  return {
    w,
    url,
    schema,
    dispose: async () => {
      await dropSchema(w).catch(() => {});
      await w.close();
    },
  };
}
