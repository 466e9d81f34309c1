import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { parseConfig, requireSettings } from '../../src/config.ts';
import { CrsError } from '../../src/errors.ts';
import { createLogger, redactText } from '../../src/log.ts';

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
