import { promises as fs } from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { FileMigrationProvider, type MigrationResultSet, Migrator } from 'kysely/migration';
import { CrsError } from '../errors.ts';
import type { Warehouse } from './db.ts';

export const migrationFolder = path.resolve(import.meta.dirname, '..', '..', 'migrations');

export interface MigrateResult {
  applied: string[];
  alreadyApplied: number;
}

/**
 * Brings the schema to the latest migration. Safe to run from several processes at once: the
 * schema is created and migrated under a session advisory lock keyed by the schema name, so a
 * second runner waits and then finds nothing to do.
 */
export async function migrateToLatest(w: Warehouse): Promise<MigrateResult> {
  const lockClient = await w.pool.connect();
  try {
    await lockClient.query('select pg_advisory_lock(hashtext($1))', [`crs-sync:migrate:${w.schema}`]);
    await lockClient.query(`create schema if not exists "${w.schema}"`);
    const migrator = new Migrator({
      db: w.db,
      provider: new FileMigrationProvider({ fs, path, migrationFolder }),
      migrationTableSchema: w.schema,
    });
    const before = await migrator.getMigrations();
    const res: MigrationResultSet = await migrator.migrateToLatest();
    if (res.error) {
      const failed = res.results?.find((r) => r.status === 'Error')?.migrationName;
      throw new CrsError(
        'MIGRATION_FAILED',
        `migration ${failed ?? '(unknown)'} failed: ${(res.error as Error).message ?? String(res.error)}`,
        { cause: res.error },
      );
    }
    return {
      applied: (res.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName),
      alreadyApplied: before.filter((m) => m.executedAt !== undefined).length,
    };
  } finally {
    await lockClient
      .query('select pg_advisory_unlock(hashtext($1))', [`crs-sync:migrate:${w.schema}`])
      .catch(() => {});
    lockClient.release();
  }
}

/** Drops the schema with everything in it (tests and `demo` clean-up only). */
export async function dropSchema(w: Warehouse): Promise<void> {
  await sql`drop schema if exists ${sql.id(w.schema)} cascade`.execute(w.db);
}
