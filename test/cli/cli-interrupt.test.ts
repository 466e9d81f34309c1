import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * Ctrl-C while a command is still starting its embedded PostgreSQL: the terminal sends SIGINT to
 * the whole process group (the CLI and initdb). The CLI must end with one line and exit status 1,
 * and the half-made data directory must not stop the next command.
 */
const root = path.resolve(import.meta.dirname, '..', '..');
const bin = path.join(root, 'bin', 'crs-sync.js');
const STACK_LINE = /^\s+at /m;

function cleanEnv(): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'warn' };
  for (const k of Object.keys(env)) if (k.startsWith('CRS_') || k === 'DATABASE_URL') delete env[k];
  return env;
}

describe('a command interrupted while the embedded PostgreSQL is being created', () => {
  const cwd = mkdtempSync(path.join(tmpdir(), 'crs-interrupt-'));
  // Reachable by the user `postgres` when this runs as root, so the data stays in ./.data.
  chmodSync(cwd, 0o755);
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  it('when Ctrl-C comes during initdb, then it exits 1 with one line, and the next command starts afresh', async () => {
    const child = spawn(process.execPath, [bin, 'migrate'], {
      cwd,
      env: cleanEnv(),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const closed = new Promise<number | null>((r) => child.on('close', (c) => r(c)));
    // The marker exists from just before initdb until it has finished.
    const marker = path.join(cwd, '.data', 'postgres.initialising');
    let exited = false;
    void closed.then(() => {
      exited = true;
    });
    while (!existsSync(marker) && !exited) await new Promise((r) => setTimeout(r, 50));
    expect(exited).toBe(false);
    process.kill(-(child.pid as number), 'SIGINT');
    const code = await closed;
    expect(stderr).not.toMatch(STACK_LINE);
    expect(code).toBe(1);
    expect(stderr).toContain('crs-sync: interrupted by SIGINT');

    const again = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [bin, 'migrate'],
        { cwd, env: cleanEnv(), timeout: 180_000 },
        (err, stdout, se) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr: se }),
      );
    });
    expect(again.stderr).not.toMatch(STACK_LINE);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/embedded PostgreSQL in \.data\/postgres, .*applied /);
    expect(existsSync(marker)).toBe(false);
  }, 240_000);
});
