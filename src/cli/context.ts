import { existsSync } from 'node:fs';
import path from 'node:path';
import { config as loadDotenv } from 'dotenv';
import { type Config, parseConfig } from '../config.ts';
import { createLogger, type Logger } from '../log.ts';
import { checkConnection, openWarehouse, type Warehouse } from '../warehouse/db.ts';
import { startEmbeddedPostgres } from '../warehouse/embedded.ts';
import { migrateToLatest } from '../warehouse/migrator.ts';

/**
 * What every command starts from: the `.env` of the working directory (variables already in the
 * environment win), the validated configuration (exit 2 listing every problem) and a logger.
 */
export interface CliContext {
  config: Config;
  log: Logger;
}

let dotenvLoaded = false;

export function loadContext(): CliContext {
  if (!dotenvLoaded) {
    const file = path.resolve(process.env.CRS_ENV_FILE ?? '.env');
    if (existsSync(file)) loadDotenv({ path: file, quiet: true });
    dotenvLoaded = true;
  }
  const config = parseConfig(process.env);
  return { config, log: createLogger({ level: config.logLevel }) };
}

export interface OpenedWarehouse {
  warehouse: Warehouse;
  /** Where it is, for messages: the host and database, never the password. */
  description: string;
  embedded: boolean;
  close(): Promise<void>;
}

export const EMBEDDED_DIR = '.data/postgres';

/**
 * The warehouse of DATABASE_URL; without one, an embedded PostgreSQL whose data directory
 * (.data/postgres under the working directory) persists between commands. Migrations are applied
 * first: they are idempotent and serialised by an advisory lock.
 */
export async function openConfiguredWarehouse(
  ctx: CliContext,
  opts: { connections?: number; migrate?: boolean } = {},
): Promise<OpenedWarehouse> {
  const max = (opts.connections ?? ctx.config.loadConnections) + 4;
  let url = ctx.config.databaseUrl;
  let stopEmbedded: (() => Promise<void>) | undefined;
  let description: string;
  if (url) {
    const u = new URL(url);
    description = `${u.hostname}:${u.port || 5432}${u.pathname} (schema ${ctx.config.schema})`;
  } else {
    ctx.log.info('DATABASE_URL is not set: starting the embedded PostgreSQL');
    const emb = await startEmbeddedPostgres({ dir: EMBEDDED_DIR, persistent: true });
    url = emb.url;
    stopEmbedded = emb.stop;
    // As root in a checkout other users cannot enter, the data directory lives elsewhere.
    const shown = emb.dir === path.resolve(EMBEDDED_DIR) ? EMBEDDED_DIR : emb.dir;
    description = `embedded PostgreSQL in ${shown}, 127.0.0.1:${emb.port} (schema ${ctx.config.schema})`;
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
    if (opts.migrate !== false) await migrateToLatest(warehouse);
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
