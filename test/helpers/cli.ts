import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * The `crs-sync` command as a user runs it (bin/crs-sync.js, in a child process), for the tests
 * that hold its exit status and output to what the docs promise. System tier only.
 */
export const ROOT = path.resolve(import.meta.dirname, '..', '..');
export const BIN = path.join(ROOT, 'bin', 'crs-sync.js');

export interface CliResult {
  /** The exit status; null when a signal (or the timeout) ended it. */
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** Over the test process's environment (a key set to undefined is left out). */
  env?: Record<string, string | undefined>;
  /** LOG_LEVEL, unless `env` sets it: `silent` leaves the command's own output alone. */
  logLevel?: string;
  /** Where it runs; by default a new empty directory (no `.env`, no `.data`) named `tmpPrefix…`. */
  cwd?: string;
  tmpPrefix?: string;
  /** Its standard input. */
  input?: string;
}

/** Runs `crs-sync ARGS` to its end and returns what it said and its exit status. */
export function cliSync(args: string[], o: CliOptions = {}): CliResult {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    env: { ...process.env, LOG_LEVEL: o.logLevel ?? 'silent', ...o.env },
    encoding: 'utf8',
    cwd: o.cwd ?? mkdtempSync(path.join(tmpdir(), o.tmpPrefix ?? 'crs-cli-')),
    ...(o.input === undefined ? {} : { input: o.input }),
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Runs `crs-sync ARGS` as on a machine without this test process's warehouse and service settings
 * (no `CRS_*`, no DATABASE_URL but what `env` gives), at LOG_LEVEL=warn unless `env` sets it, in a
 * new empty directory, and stops it after `timeoutMs`.
 */
export function cliClean(
  args: string[],
  o: { env?: Record<string, string | undefined>; tmpPrefix?: string; timeoutMs?: number } = {},
): Promise<CliResult> {
  const cwd = mkdtempSync(path.join(tmpdir(), o.tmpPrefix ?? 'crs-cli-'));
  const base: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'warn' };
  for (const k of Object.keys(base)) if (k.startsWith('CRS_') || k === 'DATABASE_URL') delete base[k];
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd, env: { ...base, ...o.env }, timeout: o.timeoutMs ?? 90_000 },
      (err, stdout, stderr) => {
        const code = err && typeof err.code === 'number' ? err.code : err ? null : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
