/**
 * The CLI's entry point: memory settings that can only be made at process start, then the
 * program (program.ts).
 *
 * - V8 sizes its young generation from the machine's memory: on this kind of machine (24 GiB) it
 *   grows to 2 × 64 MB semi-spaces, more than everything else the loader holds. The loader's
 *   objects die young or live for one batch, so an 8 MB semi-space costs little GC time.
 * - V8 lets the old generation grow to about twice what survived the last full collection before
 *   the next one; the loader's garbage is mostly batch data promoted there, so a load's RSS crept
 *   up over a long file. A 20 % growth step keeps it flat (1M lines: 224 → 170 MB peak RSS for
 *   ~5 % more CPU in Node and the same elapsed time). It is a growth factor, not a cap: a command
 *   that needs a large heap still gets it.
 * - glibc's malloc gives each thread that allocates (V8's GC and compiler threads, libuv's pool)
 *   an arena of its own, and after a large block is freed it raises its mmap threshold, so that
 *   the batch buffers' churn stays in those arenas instead of going back to the system. Two
 *   arenas and a fixed 128 KiB threshold keep the loader's peak RSS within its budget.
 * - Node's compile cache, on from the start (see enableCompileCache below).
 *
 * Measured with `npm run bench:ingest` (bench/README.md: the first load's peak RSS at 1M lines
 * went from 248 MB to under 200 MB, CPU within noise). The process re-executes itself in place
 * (same PID, execve) with these settings, unless it already has them, the user set any of them,
 * or execve does not exist.
 */
import { enableCompileCache } from 'node:module';
import os from 'node:os';
import path from 'node:path';

/** V8 flags, each added unless the command line or NODE_OPTIONS already sets it. */
const V8_FLAGS: [name: string, value: string][] = [
  ['--max-semi-space-size', '8'],
  ['--heap-growing-percent', '20'],
];
const START_ENV: Record<string, string> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '131072',
  // From the start, so that this module too comes from the cache (see below).
  ...(process.env.NODE_DISABLE_COMPILE_CACHE
    ? {}
    : { NODE_COMPILE_CACHE: path.join(os.tmpdir(), 'node-compile-cache') }),
};
// Set on the re-executed process only, so that these settings stay ours: processes the CLI starts
// (the embedded PostgreSQL, the Temporal dev server) get the environment the user gave.
const MARK = 'CRS_SYNC_TUNED';

const env = process.env;
if (env[MARK] !== undefined) {
  for (const k of env[MARK].split(',')) if (k) delete env[k];
  delete env[MARK];
} else if (typeof process.execve === 'function') {
  const argv = [...process.execArgv];
  const given = (flag: string) =>
    argv.some((a) => a.startsWith(flag)) || (env.NODE_OPTIONS ?? '').includes(flag);
  const flags = V8_FLAGS.filter(([name]) => !given(name)).map(([name, value]) => `${name}=${value}`);
  argv.unshift(...flags);
  const added = Object.keys(START_ENV).filter((k) => env[k] === undefined);
  if (flags.length > 0 || added.length > 0) {
    const next: Record<string, string | undefined> = { ...env, [MARK]: added.join(',') };
    for (const k of added) next[k] = START_ENV[k];
    // `--` before the script: Node would otherwise read a command's own `--env-file` (see
    // bin/crs-sync.js).
    process.execve(process.execPath, [process.execPath, ...argv, '--', ...process.argv.slice(1)], next);
  }
}

// Node's compile cache (in the system's temporary directory, or NODE_COMPILE_CACHE) keeps the
// TypeScript modules with their types stripped: a command whose modules are cached neither loads
// the stripper (a WebAssembly instance of ~20 MB that stays for the life of the process) nor
// strips again, so it starts in half the time. The first run of a command fills it.
enableCompileCache();

await import('./program.ts');
