import buffer from 'node:buffer';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  KNOWN_LINES_CEILING,
  parseConfig,
  RENAMED_SETTINGS,
  renamedSettingWarnings,
  requireSettings,
} from '../../src/config.ts';
import { CrsError } from '../../src/errors.ts';
import { loaderSettings, reopenPause } from '../../src/ingest/merge/load.ts';
import { createLogger, redactText } from '../../src/log.ts';
import { parseWorkerSettings } from '../../src/temporal/worker-settings.ts';

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

describe('configuration', () => {
  it('when nothing is set, then the defaults apply and the result is frozen', () => {
    const c = parseConfig({});
    expect(c.schema).toBe('crs');
    expect(c.lookbackDays).toBe(3);
    expect(c.maxLineBytes).toBe(16 * 1024 * 1024);
    expect(Object.isFrozen(c.api)).toBe(true);
  });

  it('when several settings are bad, then every one of them is listed at once', () => {
    const problems = problemsOf(() =>
      parseConfig({
        CRS_SCHEMA: 'Bad-Schema; drop table x',
        CRS_LOOKBACK_DAYS: '-1',
        CRS_BASE_URL: 'not a url',
        DATABASE_URL: 'mysql://x',
        LOG_LEVEL: 'loud',
      }),
    );
    expect(problems.map((p) => p.split(':')[0])).toEqual(
      expect.arrayContaining([
        'DATABASE_URL',
        'CRS_SCHEMA',
        'CRS_BASE_URL',
        'CRS_LOOKBACK_DAYS',
        'LOG_LEVEL',
      ]),
    );
  });

  it('when the thread API is needed with a half-configured token exchange, then the missing parts are named', () => {
    const c = parseConfig({ CRS_BASE_URL: 'http://127.0.0.1:1', CRS_TOKEN_URL: 'http://127.0.0.1:1/token' });
    const problems = problemsOf(() => requireSettings(c, ['threads']));
    expect(problems.join('\n')).toMatch(/CRS_CLIENT_ID/);
    expect(problems.join('\n')).toMatch(/CRS_CLIENT_SECRET/);
  });

  it('when a bad setting holds a secret, then the error does not repeat the secret', () => {
    const secret = 'super-secret-value-123';
    const problems = problemsOf(() =>
      parseConfig({ CRS_CLIENT_SECRET: secret, CRS_TOKEN_URL: `x${secret}` }),
    );
    expect(problems.join('\n')).not.toContain(secret);
  });
});

describe('renamed settings', () => {
  const values = {
    name: 'team-a',
    rps: '25',
    contract: 'freeze',
    partitions: '7',
  };
  const read = (c: ReturnType<typeof parseConfig>) => [
    c.api.rateBudget,
    c.api.rateBudgetRps,
    c.schemaContract,
    c.loadConnections,
  ];

  it('when the new names are set, then they are read and nothing warns', () => {
    const c = parseConfig({
      CRS_SHARED_BUDGET_NAME: values.name,
      CRS_SHARED_BUDGET_RPS: values.rps,
      CRS_RECORD_CONTRACT: values.contract,
      CRS_LOAD_PARTITIONS: values.partitions,
    });
    expect(read(c)).toEqual(['team-a', 25, 'freeze', 7]);
    expect(renamedSettingWarnings(c)).toEqual([]);
  });

  it('when the old names are set, then they are still read, and each warns once naming its new name', () => {
    const c = parseConfig({
      CRS_RATE_BUDGET: values.name,
      CRS_RATE_BUDGET_RPS: values.rps,
      CRS_SCHEMA_CONTRACT: values.contract,
      CRS_LOAD_CONNECTIONS: values.partitions,
    });
    expect(read(c)).toEqual(['team-a', 25, 'freeze', 7]);
    const warnings = renamedSettingWarnings(c);
    expect(warnings).toHaveLength(4);
    for (const [old, now] of Object.entries(RENAMED_SETTINGS)) {
      expect(warnings.filter((w) => w.startsWith(`${old} is renamed ${now}:`))).toHaveLength(1);
    }
    // Off by the old name is off too.
    expect(parseConfig({ CRS_RATE_BUDGET: 'off' }).api.rateBudget).toBeUndefined();
  });

  it('when an old and a new name are both set to different values, then the configuration is refused naming both, with every other problem', () => {
    const problems = problemsOf(() =>
      parseConfig({
        CRS_LOAD_CONNECTIONS: '2',
        CRS_LOAD_PARTITIONS: '8',
        CRS_SCHEMA_CONTRACT: 'freeze',
        CRS_RECORD_CONTRACT: 'evolve',
        CRS_LOOKBACK_DAYS: '-1',
      }),
    );
    expect(problems).toEqual([
      expect.stringMatching(/^CRS_SCHEMA_CONTRACT, CRS_RECORD_CONTRACT: both are set, to different values/),
      expect.stringMatching(/^CRS_LOAD_CONNECTIONS, CRS_LOAD_PARTITIONS: both are set, to different values/),
      expect.stringMatching(/^CRS_LOOKBACK_DAYS: /),
    ]);
    // The values are not repeated: only the names.
    expect(problems.join('\n')).not.toMatch(/freeze|evolve/);
  });

  it('when an old and a new name hold the same value, then it is read, and the old name still warns', () => {
    const c = parseConfig({ CRS_RATE_BUDGET: 'team-b', CRS_SHARED_BUDGET_NAME: ' team-b ' });
    expect(c.api.rateBudget).toBe('team-b');
    expect(renamedSettingWarnings(c)).toEqual([
      expect.stringMatching(/^CRS_RATE_BUDGET is renamed CRS_SHARED_BUDGET_NAME:/),
    ]);
  });

  it('when a blank old name is set beside its new one, then the old is unset: no conflict, no warning', () => {
    const c = parseConfig({ CRS_LOAD_CONNECTIONS: ' ', CRS_LOAD_PARTITIONS: '6' });
    expect(c.loadConnections).toBe(6);
    expect(renamedSettingWarnings(c)).toEqual([]);
  });

  it('when a bad value is given under an old name, then the problem names the old name and the new', () => {
    const problems = problemsOf(() =>
      parseConfig({ CRS_LOAD_CONNECTIONS: '0', CRS_SCHEMA_CONTRACT: 'strict' }),
    );
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual([
      'CRS_LOAD_CONNECTIONS (renamed CRS_LOAD_PARTITIONS)',
      'CRS_SCHEMA_CONTRACT (renamed CRS_RECORD_CONTRACT)',
    ]);
  });
});

describe('numeric settings', () => {
  it('when a numeric setting is blank (empty or whitespace), then it is unset and its default applies, as for every other setting', () => {
    const c = parseConfig({
      CRS_DB_STATEMENT_TIMEOUT_MS: '',
      CRS_STALL_TIMEOUT_MS: ' ',
      CRS_DELETE_GUARD: '',
      CRS_KNOWN_LINES_MAX: '\t',
      CRS_SHARED_BUDGET_RPS: ' ',
      CRS_ALERT_QUARANTINE_SHARE: '',
      CRS_RATE_LIMIT_RPS: '',
    });
    expect(c.db.statementTimeoutMs).toBe(600_000);
    expect(c.stallTimeoutMs).toBe(300_000);
    expect(c.deleteGuardPct).toBe(10);
    expect(c.knownLinesMax).toBe(2_000_000);
    expect(c.api.rateBudgetRps).toBeUndefined();
    expect(c.alerts.quarantineShare).toBe(0.01);
    expect(c.api.rateLimitRps).toBe(10);
    const w = parseWorkerSettings({ CRS_METRICS_PORT: '', TEMPORAL_MAX_CONCURRENT_ACTIVITIES: ' ' });
    expect(w.metrics).toEqual({ host: '0.0.0.0', port: 9464 });
    expect(w.maxConcurrentActivities).toBe(16);
  });

  it('when a numeric setting is hex, an exponent, signed, or a fraction where a whole number is due, then each is refused by name, all at once', () => {
    const problems = problemsOf(() =>
      parseConfig({
        CRS_DELETE_GUARD: '0x10',
        CRS_BATCH_SIZE: '1e3',
        CRS_LOOKBACK_DAYS: '+5',
        CRS_LOAD_PARTITIONS: '5.0',
        CRS_RATE_LIMIT_RPS: '-1',
        CRS_ALERT_QUARANTINE_SHARE: '1e-2',
        CRS_DB_LOCK_TIMEOUT_MS: 'Infinity',
        CRS_STALL_TIMEOUT_MS: '0b101',
        CRS_SCHEMA: 'Bad',
      }),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        'CRS_DELETE_GUARD: must be a number from 0 to 100, in decimal digits with an optional fraction (no sign, exponent or 0x)',
        'CRS_BATCH_SIZE: must be a whole number from 1 to 50000, in decimal digits only (no sign, fraction, exponent or 0x)',
        'CRS_LOOKBACK_DAYS: must be a whole number from 0 to 365, in decimal digits only (no sign, fraction, exponent or 0x)',
        'CRS_LOAD_PARTITIONS: must be a whole number from 1 to 64, in decimal digits only (no sign, fraction, exponent or 0x)',
        'CRS_RATE_LIMIT_RPS: must be a number above 0 and up to 10000, in decimal digits with an optional fraction (no sign, exponent or 0x)',
      ]),
    );
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual([
      'CRS_ALERT_QUARANTINE_SHARE',
      'CRS_BATCH_SIZE',
      'CRS_DB_LOCK_TIMEOUT_MS',
      'CRS_DELETE_GUARD',
      'CRS_LOAD_PARTITIONS',
      'CRS_LOOKBACK_DAYS',
      'CRS_RATE_LIMIT_RPS',
      'CRS_SCHEMA',
      'CRS_STALL_TIMEOUT_MS',
    ]);
    const worker = problemsOf(() =>
      parseWorkerSettings({ TEMPORAL_MAX_CONCURRENT_ACTIVITIES: '0x10', CRS_METRICS_PORT: '9464.0' }),
    );
    expect(worker.map((p) => p.split(':')[0]).sort()).toEqual([
      'CRS_METRICS_PORT',
      'TEMPORAL_MAX_CONCURRENT_ACTIVITIES',
    ]);
  });

  it('when decimal numbers are given, then they are read as written, fractions where a fraction is allowed', () => {
    const c = parseConfig({ CRS_DELETE_GUARD: '2.5', CRS_BATCH_SIZE: '0500', CRS_RATE_LIMIT_RPS: '.5' });
    expect([c.deleteGuardPct, c.batchSize, c.api.rateLimitRps]).toEqual([2.5, 500, 0.5]);
  });

  it('when CRS_KNOWN_LINES_MAX is above what one read of the known lines can hold, then it is refused', () => {
    // The read is one text of 48 characters a row (src/ingest/merge/known-lines.ts), and it asks for
    // one row more than the setting; a V8 string holds at most this many characters.
    expect((KNOWN_LINES_CEILING + 1) * 48).toBeLessThan(buffer.constants.MAX_STRING_LENGTH);
    expect(parseConfig({ CRS_KNOWN_LINES_MAX: String(KNOWN_LINES_CEILING) }).knownLinesMax).toBe(
      KNOWN_LINES_CEILING,
    );
    expect(problemsOf(() => parseConfig({ CRS_KNOWN_LINES_MAX: String(KNOWN_LINES_CEILING + 1) }))).toEqual([
      'CRS_KNOWN_LINES_MAX: must be a whole number from 0 to 10000000, in decimal digits only (no sign, fraction, exponent or 0x)',
    ]);
    expect(problemsOf(() => parseConfig({ CRS_KNOWN_LINES_MAX: '50000000' }))[0]).toMatch(
      /^CRS_KNOWN_LINES_MAX:/,
    );
  });

  it('when CRS_SOURCE_REOPEN_PAUSE is set, then a cut export is reopened after it, doubling up to 5 s (or the pause, if longer); unset, 250 ms', () => {
    expect(parseConfig({}).sourceReopenPauseMs).toBe(250);
    expect(parseConfig({ CRS_SOURCE_REOPEN_PAUSE: '20ms' }).sourceReopenPauseMs).toBe(20);
    expect(parseConfig({ CRS_SOURCE_REOPEN_PAUSE: '2s' }).sourceReopenPauseMs).toBe(2000);
    expect(problemsOf(() => parseConfig({ CRS_SOURCE_REOPEN_PAUSE: '0ms' }))[0]).toMatch(
      /^CRS_SOURCE_REOPEN_PAUSE:/,
    );
    expect(problemsOf(() => parseConfig({ CRS_SOURCE_REOPEN_PAUSE: '250' }))[0]).toMatch(
      /^CRS_SOURCE_REOPEN_PAUSE:/,
    );
    expect(loaderSettings(parseConfig({ CRS_SOURCE_REOPEN_PAUSE: '20ms' })).reopenPauseMs).toBe(20);
    // Five reopens at the default: 7.75 s of pauses before the attempt fails to Temporal's retry.
    expect([0, 1, 2, 3, 4, 5].map((a) => reopenPause(250, a))).toEqual([250, 500, 1000, 2000, 4000, 5000]);
    expect([0, 1, 2].map((a) => reopenPause(20_000, a))).toEqual([20_000, 20_000, 20_000]);
  });

  it('when a line or answer limit would not fit in one string, then it is refused', () => {
    const tooBig = String(512 * 1024 * 1024);
    const problems = problemsOf(() =>
      parseConfig({ CRS_MAX_LINE_BYTES: tooBig, CRS_MAX_RESPONSE_BYTES: tooBig }),
    );
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual([
      'CRS_MAX_LINE_BYTES',
      'CRS_MAX_RESPONSE_BYTES',
    ]);
  });
});

describe('logging', () => {
  it('when an object with credentials is logged, then tokens, keys and Authorization headers are redacted', () => {
    let out = '';
    const sink = new Writable({
      write(chunk, _enc, cb) {
        out += chunk;
        cb();
      },
    });
    const log = createLogger({ level: 'info', pretty: false, destination: sink });
    log.info(
      {
        headers: { authorization: 'Bearer abc.def.ghi', 'x-api-key': 'key-123456' },
        config: { clientSecret: 'shh-1', accessToken: 'tok-1' },
        err: new Error('request failed with Authorization: Bearer abc.def.ghi'),
      },
      'request failed',
    );
    for (const s of ['abc.def.ghi', 'key-123456', 'shh-1', 'tok-1']) expect(out).not.toContain(s);
    expect(out).toContain('[redacted]');
  });

  it('when free text carries a bearer token or a database password, then redactText masks them', () => {
    expect(redactText('Authorization: Bearer eyJhbGciOi.x.y failed')).not.toContain('eyJhbGciOi');
    expect(redactText('postgres://crs:hunter2@db:5432/x')).not.toContain('hunter2');
  });

  it('when messages about credentials are ordinary English, then redaction leaves every word in place', () => {
    const messages = [
      'CRS_ACCESS_TOKEN: required for the thread API, or instead CRS_TOKEN_URL + CRS_CLIENT_ID + CRS_CLIENT_SECRET',
      'CRS_CLIENT_SECRET: required for token exchange',
      'CRS_API_KEY: required for the legacy API',
      'the token: missing, expired or revoked',
      'password: Required',
      'the service wants a bearer token in the Authorization header',
      'secret: not-set (see the README)',
      'api-key: invalid',
    ];
    for (const m of messages) expect(redactText(m)).toBe(m);
  });

  it('when text carries real secret shapes, then each value is masked and the words around it stay', () => {
    const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjcnMtc3luYyJ9.c2lnbmF0dXJlLTAwMDE';
    const cases: [text: string, secret: string, kept: string][] = [
      [`upstream said: invalid ${jwt} (expired)`, jwt, '(expired)'],
      ['Authorization: Bearer tok_9f8e7d6c5b4a rejected', 'tok_9f8e7d6c5b4a', 'rejected'],
      ['connect with password=hunter2&sslmode=require', 'hunter2', 'sslmode=require'],
      ['password: s3cr3t-Value!', 's3cr3t-Value!', 'password:'],
      ['{"access_token":"abcdefghij","token_type":"Bearer"}', 'abcdefghij', 'token_type'],
      ['GET https://svc:pa55w0rd@api.example.com/v1 failed', 'pa55w0rd', 'api.example.com'],
      ['postgresql://crs:db-Pass-42@db:5432/crs refused', 'db-Pass-42', 'refused'],
      [
        'CRS_CLIENT_SECRET=averyveryverylongsecretvalue',
        'averyveryverylongsecretvalue',
        'CRS_CLIENT_SECRET=',
      ],
    ];
    for (const [text, secret, kept] of cases) {
      const out = redactText(text);
      expect(out, text).not.toContain(secret);
      expect(out, text).toContain('[redacted]');
      expect(out, text).toContain(kept);
    }
  });

  it('when a configured secret with no telltale name before it reaches a log line, then the logger masks it', () => {
    let out = '';
    const sink = new Writable({
      write(chunk, _enc, cb) {
        out += chunk;
        cb();
      },
    });
    const token = 'plainTokenValue9876';
    const log = createLogger({ level: 'info', pretty: false, destination: sink, secrets: [token, 'abc'] });
    log.warn({ detail: `upstream echoed ${token}` }, `call failed after sending ${token}`);
    log.error({ err: new Error(`rejected ${token}`) }, 'request failed');
    expect(out).not.toContain(token);
    expect(out).toContain('upstream echoed [redacted]');
    expect(out).toContain('call failed after sending [redacted]');
    expect(out).toContain('rejected [redacted]');
  });

  it('when a one-group pattern masks a value, then nothing but the mask replaces it (no match offset appended)', () => {
    expect(redactText('token=abc123 and more')).toBe('token=[redacted] and more');
    expect(redactText('Authorization: Bearer eyJx.y.z')).toBe('Authorization: Bearer [redacted]');
  });
});
