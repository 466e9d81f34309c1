import { existsSync } from 'node:fs';
import path from 'node:path';
import { config as loadDotenv } from 'dotenv';
import { type Config, configuredSecrets, parseConfig, renamedSettingWarnings } from '../config.ts';
import { CrsError } from '../errors.ts';
import { createLogger, type Logger } from '../log.ts';
import { checkConnection, openWarehouse, type Warehouse } from '../warehouse/db.ts';
import { embeddedDataDir, startEmbeddedPostgres } from '../warehouse/embedded.ts';
import { migrateToLatest, pendingMigrations } from '../warehouse/migrator.ts';

/**
 * What every command starts from: the `.env` of the working directory (variables already in the
 * environment win), the validated configuration (exit 2 listing every problem) and a logger.
 */
export interface CliContext {
  config: Config;
  log: Logger;
}

let dotenvLoaded = false;
// A command may load its context more than once; the old names are the same each time.
let renamesWarned = false;

export function loadContext(): CliContext {
  if (!dotenvLoaded) {
    const file = path.resolve(process.env.CRS_ENV_FILE ?? '.env');
    if (existsSync(file)) loadDotenv({ path: file, quiet: true });
    dotenvLoaded = true;
  }
  const config = parseConfig(process.env);
  const log = createLogger({ level: config.logLevel, secrets: configuredSecrets(config) });
  if (!renamesWarned) {
    for (const message of renamedSettingWarnings(config)) log.warn(message);
    renamesWarned = true;
  }
  return { config, log };
}

export interface OpenedWarehouse {
  warehouse: Warehouse;
  /** Where it is, for messages: the host and database, never the password. */
  description: string;
  embedded: boolean;
  close(): Promise<void>;
}

export const EMBEDDED_DIR = '.data/postgres';

/** The flag of the commands that refuse the embedded PostgreSQL unless told (worker, schedule create). */
export const ALLOW_EMBEDDED_FLAG = '--allow-embedded';

/**
 * Stops a long-running command that would otherwise fall back to the embedded PostgreSQL: a
 * worker or schedule without DATABASE_URL is most likely a deployment whose secret was not
 * mounted, and it would write real data into a local database nobody reads.
 */
export function refuseEmbeddedUnlessAllowed(
  ctx: CliContext,
  command: string,
  flag: boolean | undefined,
): void {
  if (ctx.config.databaseUrl || ctx.config.allowEmbedded || flag) return;
  throw new CrsError(
    'USAGE',
    `${command} refuses to run without DATABASE_URL: its work would go to the embedded PostgreSQL in ` +
      `${EMBEDDED_DIR}, a local database, not your warehouse. Set DATABASE_URL to your PostgreSQL server; ` +
      `to use the embedded PostgreSQL on purpose (a local worker), pass ${ALLOW_EMBEDDED_FLAG} or set ` +
      'CRS_ALLOW_EMBEDDED=1',
  );
}

/**
 * What a command does with the schema: `migrate` brings it up to date first (commands that
 * write), `current` only checks that it is (commands that read: exit 2 naming `crs-sync migrate`
 * when it is behind or absent), `as-is` leaves it to the command (`migrate` itself).
 */
export type SchemaUse = 'migrate' | 'current' | 'as-is';

/**
 * The warehouse of DATABASE_URL; without one, an embedded PostgreSQL whose data directory
 * (.data/postgres under the working directory) persists between commands, announced on stderr.
 * A command that only reads (`schema: 'current'`) never creates that cluster: with none there it
 * exits 2 saying where it looked. Migrations are idempotent and serialised by an advisory lock.
 */
export async function openConfiguredWarehouse(
  ctx: CliContext,
  opts: { connections?: number; schema?: SchemaUse } = {},
): Promise<OpenedWarehouse> {
  const max = (opts.connections ?? ctx.config.loadConnections) + 4;
  let url = ctx.config.databaseUrl;
  let stopEmbedded: (() => Promise<void>) | undefined;
  let description: string;
  if (url) {
    const u = new URL(url);
    description = `${u.hostname}:${u.port || 5432}${u.pathname} (schema ${ctx.config.schema})`;
  } else {
    if ((opts.schema ?? 'migrate') === 'current') requireEmbeddedCluster();
    const emb = await startEmbeddedPostgres({ dir: EMBEDDED_DIR, persistent: true });
    url = emb.url;
    stopEmbedded = emb.stop;
    // As root in a checkout other users cannot enter, the data directory lives elsewhere.
    const shown = emb.dir === path.resolve(EMBEDDED_DIR) ? EMBEDDED_DIR : emb.dir;
    description = `embedded PostgreSQL in ${shown}, 127.0.0.1:${emb.port} (schema ${ctx.config.schema})`;
    // Whatever LOG_LEVEL says: data going to a local directory must never go unnoticed.
    process.stderr.write(
      `crs-sync: DATABASE_URL is not set: using the embedded PostgreSQL, data in ${shown}\n`,
    );
  }
  const warehouse = openWarehouse({
    url,
    schema: ctx.config.schema,
    max,
    log: ctx.log,
    timeouts: {
      statementMs: ctx.config.db.statementTimeoutMs,
      lockMs: ctx.config.db.lockTimeoutMs,
      idleTxMs: ctx.config.db.idleTxTimeoutMs,
      migrationMs: ctx.config.db.migrationTimeoutMs,
      keepAliveMs: ctx.config.db.keepAliveMs,
    },
  });
  try {
    await checkConnection(warehouse);
    const use = opts.schema ?? 'migrate';
    if (use === 'migrate') await migrateToLatest(warehouse);
    else if (use === 'current') await requireCurrentSchema(warehouse, description);
  } catch (err) {
    await warehouse.close().catch(() => {});
    await stopEmbedded?.();
    throw err;
  }
  return {
    warehouse,
    description,
    embedded: stopEmbedded !== undefined,
    close: async () => {
      await warehouse.close();
      await stopEmbedded?.();
    },
  };
}

/**
 * A reader without DATABASE_URL reads the embedded PostgreSQL of the working directory, and
 * there is none: run elsewhere than where the data is, or with the variable lost. Starting one
 * would create an empty cluster here (tens of MB), and `migrate` then a second, empty warehouse.
 */
function requireEmbeddedCluster(): void {
  const found = embeddedDataDir(EMBEDDED_DIR);
  if (found.exists) return;
  throw new CrsError(
    'USAGE',
    `DATABASE_URL is not set, and there is no embedded PostgreSQL in ${found.dir} (its place for the working ` +
      `directory ${process.cwd()}): nothing to read. Set DATABASE_URL to your warehouse, or run from the ` +
      `directory whose ${EMBEDDED_DIR} holds it; a command that writes (migrate, import) would create a new, ` +
      'empty one here',
  );
}

/** Readers never migrate: a schema behind the code is for `crs-sync migrate` to bring up. */
async function requireCurrentSchema(warehouse: Warehouse, description: string): Promise<void> {
  const pending = await pendingMigrations(warehouse);
  if (pending.length === 0) return;
  throw new CrsError(
    'USAGE',
    `the warehouse ${description} is behind this version of crs-sync (${pending.length} migration(s) not applied, ` +
      `first ${pending[0]}); run crs-sync migrate`,
  );
}
