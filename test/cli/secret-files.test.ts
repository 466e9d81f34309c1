import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_SETTINGS } from '../../src/config.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Secrets given as files as an operator meets them: the real CLI, its settings in a CRS_ENV_FILE
 * whose DATABASE_URL_FILE names a file relative to the working directory (a mounted secret),
 * importing into a real Postgres schema; and the refusals, which name settings and paths only.
 */
const root = path.resolve(import.meta.dirname, '..', '..');

/** The CLI in `cwd`, with none of the secrets (or their files) of the environment it runs in. */
function cli(args: string[], env: Record<string, string>, cwd: string) {
  const base: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'warn' };
  for (const name of SECRET_SETTINGS) {
    delete base[name];
    delete base[`${name}_FILE`];
  }
  const r = spawnSync(process.execPath, [path.join(root, 'bin/crs-sync.js'), ...args], {
    env: { ...base, ...env },
    encoding: 'utf8',
    cwd,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function dayFile(day: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'crs-secret-files-data-')), `${day}.jsonl`);
  writeFileSync(file, toJsonl(makeRecords(3, { day, seed: `secret-files-${day}` })));
  return file;
}

describe('secrets from files in the CLI', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'secretfiles' });
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when DATABASE_URL_FILE in the CRS_ENV_FILE names a secret file (relative, ending in a newline), then the command reads the warehouse from it', () => {
    const cwd = mkdtempSync(path.join(tmpdir(), 'crs-secret-files-'));
    writeFileSync(path.join(cwd, 'database-url'), `${tw.url}\n`);
    writeFileSync(
      path.join(cwd, 'settings.env'),
      `DATABASE_URL_FILE=database-url\nCRS_SCHEMA=${tw.schema}\n`,
    );
    const r = cli(['import', dayFile('2026-10-11'), '--no-progress'], { CRS_ENV_FILE: 'settings.env' }, cwd);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/inserted\s+3/);
  });

  it('when a setting is given both as a variable and as a file, then the command exits 2 naming both, and shows neither value', () => {
    const cwd = mkdtempSync(path.join(tmpdir(), 'crs-secret-files-'));
    writeFileSync(path.join(cwd, 'database-url'), 'postgres://crs:file-password-0001@127.0.0.1/crs\n');
    const r = cli(
      ['import', dayFile('2026-10-12'), '--no-progress'],
      {
        DATABASE_URL: 'postgres://crs:env-password-0001@127.0.0.1/crs',
        DATABASE_URL_FILE: 'database-url',
        CRS_ENV_FILE: '/nonexistent',
      },
      cwd,
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'DATABASE_URL, DATABASE_URL_FILE: both are set; DATABASE_URL_FILE names a file that holds DATABASE_URL: set one of them',
    );
    expect(r.stderr + r.stdout).not.toMatch(/(file|env)-password-0001/);
  });

  it('when secret files are missing or empty, then the command exits 2 naming each setting and its path, before it reads anything', () => {
    const cwd = mkdtempSync(path.join(tmpdir(), 'crs-secret-files-'));
    writeFileSync(path.join(cwd, 'empty-key'), '');
    const r = cli(
      ['import', dayFile('2026-10-13'), '--no-progress'],
      {
        DATABASE_URL: tw.url,
        CRS_SCHEMA: tw.schema,
        CRS_ACCESS_TOKEN_FILE: '/run/secrets/not-mounted',
        TEMPORAL_API_KEY_FILE: 'empty-key',
        CRS_ENV_FILE: '/nonexistent',
      },
      cwd,
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('CRS_ACCESS_TOKEN_FILE: cannot read /run/secrets/not-mounted (no such file)');
    expect(r.stderr).toContain(`TEMPORAL_API_KEY_FILE: ${path.join(cwd, 'empty-key')} is empty`);
    expect(r.stdout).toBe('');
  });
});
