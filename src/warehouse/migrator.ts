import { promises as fs } from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import {
  FileMigrationProvider,
  type MigrationInfo,
  type MigrationResultSet,
  Migrator,
} from 'kysely/migration';
import { CrsError } from '../errors.ts';
import { DEFAULT_DB_TIMEOUTS, internalSchema, openWarehouse, type Warehouse } from './db.ts';
import { isRetryableDbError, toDbCrsError } from './db-errors.ts';

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
export async function migrateToLatest(base: Warehouse): Promise<MigrateResult> {
  // A pool of its own whose sessions allow a migration's long statements and lock waits (behind
  // a running load), while still bounding one that hangs.
  const limit = base.options.timeouts?.migrationMs ?? DEFAULT_DB_TIMEOUTS.migrationMs;
  const w = openWarehouse({
    ...base.options,
    max: 2,
    timeouts: { ...base.options.timeouts, statementMs: limit, lockMs: limit },
  });
  const lockClient = await w.pool.connect().catch(async (err: unknown) => {
    await w.close();
    throw err;
  });
  try {
    await lockClient.query('select pg_advisory_lock(hashtext($1))', [`crs-sync:migrate:${w.schema}`]);
    await lockClient.query(`create schema if not exists "${w.schema}"`);
    const migrator = new Migrator({
      db: w.db,
      provider: new FileMigrationProvider({ fs, path, migrationFolder }),
      migrationTableSchema: w.schema,
    });
    const { before, res } = await migrateOnce(migrator);
    if (res.error) {
      const failed = res.results?.find((r) => r.status === 'Error')?.migrationName;
      // A lost connection or a timeout is no fault of the migration (it rolled back): run it again.
      if (isRetryableDbError(res.error)) {
        throw toDbCrsError(res.error, 'MIGRATION_FAILED', `migration ${failed ?? '(unknown)'} interrupted`);
      }
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
  } catch (err) {
    // Waiting for another migrator's lock past the timeout, or a connection lost: retryable.
    throw isRetryableDbError(err) ? toDbCrsError(err, 'MIGRATION_FAILED', 'migrations interrupted') : err;
  } finally {
    await lockClient
      .query('select pg_advisory_unlock(hashtext($1))', [`crs-sync:migrate:${w.schema}`])
      .catch(() => {});
    lockClient.release();
    await w.close();
  }
}

/**
 * The migrations the code has that the schema has not run (all of them when the schema or its
 * migration table is absent). Reads only: for commands that must not change the schema.
 */
export async function pendingMigrations(w: Warehouse): Promise<string[]> {
  const migrator = new Migrator({
    db: w.db,
    provider: new FileMigrationProvider({ fs, path, migrationFolder }),
    migrationTableSchema: w.schema,
  });
  for (let attempt = 1; ; attempt++) {
    try {
      const all = await migrator.getMigrations();
      return all.filter((m) => m.executedAt === undefined).map((m) => m.name);
    } catch (err) {
      if (!(isListRace(err) && attempt < LIST_ATTEMPTS)) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
  }
}

// Kysely's migrator finds its own tables by listing every table of every schema, and the
// statement that lists them fails with "schema … does not exist" (3F000) or "relation … does not
// exist" (42P01) when another schema is dropped at that moment (tests and demos drop theirs), or
// "column … does not exist" (42703, from pg_get_serial_sequence) while another schema's migration
// alters a table it is listing. No migration has run then, so listing again is safe.
const LIST_RACE_CODES = new Set(['3F000', '42P01', '42703']);
const LIST_ATTEMPTS = 10;

function isListRace(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && LIST_RACE_CODES.has(code);
}

async function migrateOnce(
  migrator: Migrator,
): Promise<{ before: readonly MigrationInfo[]; res: MigrationResultSet }> {
  for (let attempt = 1; ; attempt++) {
    try {
      const before = await migrator.getMigrations();
      const res = await migrator.migrateToLatest();
      const nothingRan = (res.results ?? []).length === 0;
      if (!(res.error && nothingRan && isListRace(res.error) && attempt < LIST_ATTEMPTS))
        return { before, res };
    } catch (err) {
      if (!(isListRace(err) && attempt < LIST_ATTEMPTS)) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
  }
}

/** Drops the schema and its internal one with everything in them (tests and `demo` clean-up only). */
export async function dropSchema(w: Warehouse): Promise<void> {
  await sql`drop schema if exists ${sql.id(w.schema)}, ${sql.id(internalSchema(w.schema))} cascade`.execute(
    w.db,
  );
}
