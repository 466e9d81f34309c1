import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { FileMigrationProvider, Migrator } from 'kysely/migration';
import { openWarehouse, type Warehouse } from '../../src/warehouse/db.ts';
import { dropSchema, migrateToLatest, migrationFolder } from '../../src/warehouse/migrator.ts';
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

/**
 * Migrates a test warehouse made with `migrate: false` up to the migration before `name` (before
 * the last one when none is named): the schema as the release before left it. Returns every
 * migration's name, in order. Kysely finds its own tables by listing every table of every schema,
 * which fails with 3F000 or 42P01 when another file drops its schema at that moment (files run
 * side by side, and other runs share the database); it lists again then, as migrateToLatest does.
 */
export async function migrateToBefore(tw: TestWarehouse, name?: string): Promise<string[]> {
  await tw.w.pool.query(`create schema if not exists "${tw.schema}"`);
  const migrator = new Migrator({
    db: tw.w.db,
    provider: new FileMigrationProvider({ fs, path, migrationFolder }),
    migrationTableSchema: tw.schema,
  });
  const all = (await listedAgain(() => migrator.getMigrations())).map((m) => m.name);
  const at = name === undefined ? all.length - 1 : all.indexOf(name);
  const before = all[at - 1];
  if (at < 1 || before === undefined) throw new Error(`no migration before ${name ?? 'the last'}`);
  await listedAgain(async () => {
    const r = await migrator.migrateTo(before);
    if (r.error) throw r.error;
  });
  return all;
}

async function listedAgain<T>(f: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await f();
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code;
      if (!(attempt < 10 && (code === '3F000' || code === '42P01'))) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
  }
}
