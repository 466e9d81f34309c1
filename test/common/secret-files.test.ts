import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dashboardSettings } from '../../src/cli/commands/dashboard.ts';
import {
  configuredSecrets,
  parseConfig,
  SECRET_SETTINGS,
  secretOfFileText,
  withSecretFiles,
} from '../../src/config.ts';
import { CrsError } from '../../src/errors.ts';

/**
 * Secrets given as files (NAME_FILE), the Docker and Kubernetes convention, as parseConfig
 * meets them: real files in a temporary folder.
 */
const dir = mkdtempSync(path.join(tmpdir(), 'crs-secret-files-'));
let n = 0;
/** A file holding `text`, its absolute path. */
function secretFile(text: string): string {
  const file = path.join(dir, `secret-${++n}`);
  writeFileSync(file, text);
  return file;
}

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CrsError);
    expect((err as CrsError).code).toBe('CONFIG_INVALID');
    return (err as CrsError).details?.problems as string[];
  }
  throw new Error('expected a configuration error');
}

const VALUES = {
  DATABASE_URL: 'postgres://crs:db-password-0001@db.internal:5432/crs',
  CRS_SERVICE_ACCOUNT_TOKEN: 'service-account-token-0001',
  CRS_ACCESS_TOKEN: 'access-token-0001',
  CRS_CLIENT_SECRET: 'client-secret-0001',
  CRS_API_KEY: 'api-key-0001',
  CRS_ALERT_WEBHOOK_URL: 'https://hooks.example.com/services/T000/B000/webhook-secret-0001',
  TEMPORAL_API_KEY: 'temporal-api-key-0001',
};

describe('secrets from files (NAME_FILE)', () => {
  it('when every secret the configuration reads is given as a file ending in a newline, then each is read without it, and where it came from is kept', () => {
    const env: Record<string, string> = {};
    const files: Record<string, string> = {};
    for (const [name, value] of Object.entries(VALUES)) {
      files[name] = secretFile(`${value}\n`);
      env[`${name}_FILE`] = files[name];
    }
    const c = parseConfig(env);
    expect(c.databaseUrl).toBe(VALUES.DATABASE_URL);
    expect(c.api.serviceAccountToken).toBe(VALUES.CRS_SERVICE_ACCOUNT_TOKEN);
    expect(c.api.accessToken).toBe(VALUES.CRS_ACCESS_TOKEN);
    expect(c.api.clientSecret).toBe(VALUES.CRS_CLIENT_SECRET);
    expect(c.api.apiKey).toBe(VALUES.CRS_API_KEY);
    expect(c.alerts.webhookUrls).toEqual([VALUES.CRS_ALERT_WEBHOOK_URL]);
    expect(c.temporal.apiKey).toBe(VALUES.TEMPORAL_API_KEY);
    expect(c.secretFiles).toEqual(files);
    // The client's share: the service's four credentials, each to be read again on a 401.
    expect(c.api.secretFiles).toEqual({
      CRS_SERVICE_ACCOUNT_TOKEN: files.CRS_SERVICE_ACCOUNT_TOKEN,
      CRS_ACCESS_TOKEN: files.CRS_ACCESS_TOKEN,
      CRS_CLIENT_SECRET: files.CRS_CLIENT_SECRET,
      CRS_API_KEY: files.CRS_API_KEY,
    });
    // Read from a file, a secret is masked in the logs like one from the environment.
    expect(configuredSecrets(c)).toEqual(
      expect.arrayContaining([VALUES.CRS_ACCESS_TOKEN, 'db-password-0001', VALUES.TEMPORAL_API_KEY]),
    );
  });

  it('when a file ends with line ends, then exactly one is removed (\\n or \\r\\n), nothing else', () => {
    expect(secretOfFileText('tok\n')).toBe('tok');
    expect(secretOfFileText('tok\r\n')).toBe('tok');
    expect(secretOfFileText('tok')).toBe('tok');
    expect(secretOfFileText('tok\n\n')).toBe('tok\n');
    expect(secretOfFileText('tok\r')).toBe('tok\r');
    expect(secretOfFileText('to\nk\n')).toBe('to\nk');
    // Written on Windows, as a Kubernetes secret from such a file would be.
    expect(parseConfig({ CRS_API_KEY_FILE: secretFile('api-key-crlf\r\n') }).api.apiKey).toBe('api-key-crlf');
  });

  it('when a setting is set both as a variable and as a file, then the configuration is refused naming both, without either value', () => {
    const problems = problemsOf(() =>
      parseConfig({
        CRS_ACCESS_TOKEN: 'from-the-environment-0001',
        CRS_ACCESS_TOKEN_FILE: secretFile('from-the-file-0001\n'),
      }),
    );
    expect(problems).toEqual([
      'CRS_ACCESS_TOKEN, CRS_ACCESS_TOKEN_FILE: both are set; CRS_ACCESS_TOKEN_FILE names a file that holds CRS_ACCESS_TOKEN: set one of them',
    ]);
    expect(problems.join('\n')).not.toMatch(/from-the-(environment|file)/);
  });

  it('when a file is missing, is a directory, or is empty, then each is refused naming the setting and the path, all at once with every other problem', () => {
    const missing = path.join(dir, 'not-mounted');
    const folder = path.join(dir, 'a-folder');
    mkdirSync(folder);
    const empty = secretFile('');
    const newlineOnly = secretFile('\n');
    const problems = problemsOf(() =>
      parseConfig({
        DATABASE_URL_FILE: missing,
        CRS_API_KEY_FILE: folder,
        CRS_CLIENT_SECRET_FILE: empty,
        TEMPORAL_API_KEY_FILE: newlineOnly,
        CRS_LOOKBACK_DAYS: 'many',
      }),
    );
    expect(problems).toEqual([
      `DATABASE_URL_FILE: cannot read ${missing} (no such file)`,
      `CRS_CLIENT_SECRET_FILE: ${empty} is empty`,
      `CRS_API_KEY_FILE: ${folder} is not a file`,
      `TEMPORAL_API_KEY_FILE: ${newlineOnly} is empty`,
      'CRS_LOOKBACK_DAYS: must be a whole number from 0 to 365, in decimal digits only (no sign, fraction, exponent or 0x)',
    ]);
  });

  it('when a file is far larger than any secret, then it is refused unread', () => {
    const big = secretFile('x'.repeat(65 * 1024));
    expect(problemsOf(() => parseConfig({ CRS_API_KEY_FILE: big }))).toEqual([
      `CRS_API_KEY_FILE: ${big} is larger than 64 KiB, too large for a secret`,
    ]);
  });

  it('when a file holds a value its setting refuses, then the problem names the setting, the file setting and the path, never the value', () => {
    const file = secretFile('mysql://crs:db-password-0002@db/crs\n');
    const problems = problemsOf(() => parseConfig({ DATABASE_URL_FILE: file }));
    expect(problems).toEqual([
      `DATABASE_URL (read from DATABASE_URL_FILE, ${file}): must be a postgres:// or postgresql:// URL`,
    ]);
    expect(problems.join('\n')).not.toContain('db-password-0002');
  });

  it('when a file setting is blank, then it is unset, as any blank setting, and the variable is read', () => {
    const c = parseConfig({ CRS_API_KEY: 'api-key-0003', CRS_API_KEY_FILE: '  ' });
    expect(c.api.apiKey).toBe('api-key-0003');
    expect(c.secretFiles).toEqual({});
  });

  it('when a file is named by a relative path, then it is read from the working directory', () => {
    const file = secretFile('api-key-0004\n');
    const c = parseConfig({ CRS_API_KEY_FILE: path.relative(process.cwd(), file) });
    expect(c.api.apiKey).toBe('api-key-0004');
    expect(c.secretFiles.CRS_API_KEY).toBe(file);
  });

  it('when a secret no configuration field reads is given as a bad file (the dashboard token, the pseudonym key), then every command reports it all the same', () => {
    const missing = path.join(dir, 'no-such-key');
    expect(SECRET_SETTINGS).toEqual(expect.arrayContaining(['CRS_DASHBOARD_TOKEN', 'CRS_PSEUDONYM_KEY']));
    expect(
      problemsOf(() => parseConfig({ CRS_PSEUDONYM_KEY_FILE: missing, CRS_DASHBOARD_TOKEN_FILE: missing })),
    ).toEqual([
      `CRS_DASHBOARD_TOKEN_FILE: cannot read ${missing} (no such file)`,
      `CRS_PSEUDONYM_KEY_FILE: cannot read ${missing} (no such file)`,
    ]);
  });

  it('when the dashboard token is given as a file, then the dashboard reads it, and refuses it beside the variable', () => {
    const token = 'dashboard-token-0001-abcdef';
    const file = secretFile(`${token}\n`);
    expect(dashboardSettings('0.0.0.0', { CRS_DASHBOARD_TOKEN_FILE: file }).token).toBe(token);
    const problems = problemsOf(() =>
      dashboardSettings('0.0.0.0', { CRS_DASHBOARD_TOKEN_FILE: file, CRS_DASHBOARD_TOKEN: token }),
    );
    expect(problems[0]).toMatch(/^CRS_DASHBOARD_TOKEN, CRS_DASHBOARD_TOKEN_FILE: both are set/);
    expect(problems.join('\n')).not.toContain(token);
  });

  it('when code reads the environment itself (the demo), then withSecretFiles gives it the secrets of the files and drops the file settings', () => {
    const file = secretFile(`${VALUES.DATABASE_URL}\n`);
    const env = withSecretFiles({ DATABASE_URL_FILE: file, CRS_SCHEMA: 'x' });
    expect(env).toEqual({ DATABASE_URL: VALUES.DATABASE_URL, CRS_SCHEMA: 'x' });
  });

  it('when the settings are documented, then the README gives the file form of every secret setting it lists', () => {
    const readme = readFileSync(path.resolve(import.meta.dirname, '..', '..', 'README.md'), 'utf8');
    // A secret setting the README does not list yet (CRS_PSEUDONYM_KEY before it is read) is
    // held to it once it does.
    const listed = SECRET_SETTINGS.filter((name) => readme.includes(`\`${name}\``));
    expect(listed.length).toBeGreaterThanOrEqual(SECRET_SETTINGS.length - 1);
    for (const name of listed) expect(readme, name).toContain(`\`${name}_FILE\``);
  });
});
