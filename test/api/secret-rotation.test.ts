import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createServiceClient, type ServiceClient } from '../../src/api/index.ts';
import { parseConfig } from '../../src/config.ts';
import { type RotatableCredential, type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { captureLog } from './helpers/client-setup.ts';

/**
 * A credential given as a file (CRS_ACCESS_TOKEN_FILE, …) and rotated on disk while the client
 * runs, against the project's simulator over real HTTP: the simulator takes the new credential
 * and refuses the old one, the file gets the new one, and the client's next call succeeds after
 * one refused request, without a new client (a restart). The client is built as the CLI builds
 * it: parseConfig over the environment, then the client of `config.api`.
 */
let sim: Simulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function simulator(): Promise<Simulator> {
  sim = await startSimulator({ seed: 23, days: 2, recordsPerDay: 40, now: runningClock(PINNED) });
  return sim;
}

/** A secret file as a secret store writes it: a new file renamed over the old, ending in a newline. */
function writeSecret(file: string, value: string): void {
  writeFileSync(`${file}.new`, `${value}\n`);
  renameSync(`${file}.new`, file);
}

function secretFile(name: string, value: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'crs-rotation-')), name);
  writeSecret(file, value);
  return file;
}

function clientOf(
  s: Simulator,
  env: Record<string, string>,
  baseUrl = s.baseUrl,
): { api: ServiceClient; logText: () => string } {
  const config = parseConfig({
    CRS_BASE_URL: baseUrl,
    CRS_LEGACY_BASE_URL: s.legacyBaseUrl,
    CRS_RATE_LIMIT_RPS: '500',
    ...env,
  });
  const { log, text } = captureLog();
  return { api: createServiceClient({ ...config.api, concurrency: 4 }, log), logText: text };
}

/** Rotates `kind` at the service and writes the new value to `file`; returns the old and the new. */
function rotate(s: Simulator, kind: RotatableCredential, file: string): { before: string; after: string } {
  const before = s.credentials[kind];
  const after = s.rotateCredential(kind);
  writeSecret(file, after);
  return { before, after };
}

function expectNoSecret(text: string, ...secrets: string[]): void {
  for (const secret of secrets) expect(text).not.toContain(secret);
}

describe('a credential file rotated on disk, over the simulator', () => {
  it('when the static access token file is rotated, then the next call is refused once, reads the file again and succeeds, and later calls use the new token at once', async () => {
    const s = await simulator();
    const file = secretFile('access-token', s.credentials.accessToken);
    const { api, logText } = clientOf(s, { CRS_ACCESS_TOKEN_FILE: file });
    expect((await api.listThreads()).length).toBe(s.truth.threads().length);
    expect(api.stats()).toMatchObject({ requests: 1, tokenRefreshes: 0 });

    const { before, after } = rotate(s, 'accessToken', file);
    expect((await api.listThreads()).length).toBe(s.truth.threads().length);
    // One request refused (401), the file read again, one request with the new token.
    expect(api.stats()).toMatchObject({ requests: 3, retries: 0, tokenRefreshes: 1 });
    await api.listThreads();
    expect(api.stats()).toMatchObject({ requests: 4, tokenRefreshes: 1 });

    expect(logText()).toContain(
      'the service refused CRS_ACCESS_TOKEN; read again from CRS_ACCESS_TOKEN_FILE',
    );
    expectNoSecret(logText(), before, after);
  });

  it('when the service-account token file is rotated, then the next export is refused once and then streams the whole day', async () => {
    const s = await simulator();
    const file = secretFile('service-account', s.credentials.serviceAccountToken);
    const { api, logText } = clientOf(s, {
      CRS_SERVICE_ACCOUNT_TOKEN_FILE: file,
      CRS_ACCESS_TOKEN: s.credentials.accessToken,
    });
    const day = s.truth.days()[0] as string;
    const { before, after } = rotate(s, 'serviceAccountToken', file);
    const chunks: Buffer[] = [];
    for await (const chunk of await api.exportMessages({ startDate: day, endDate: day }))
      chunks.push(Buffer.from(chunk));
    const lines = Buffer.concat(chunks)
      .toString('utf8')
      .split('\n')
      .filter((l) => l !== '');
    expect(lines).toEqual(s.truth.exportDayLines(day));
    expect(api.stats()).toMatchObject({ requests: 2, tokenRefreshes: 1 });
    expectNoSecret(logText(), before, after);
  });

  it('when the API key file is rotated, then the legacy artifact call is refused once and then answers', async () => {
    const s = await simulator();
    const file = secretFile('api-key', s.credentials.apiKey);
    // The v2 base points at a path that 404s for artifacts: the legacy path serves them.
    const { api, logText } = clientOf(
      s,
      { CRS_API_KEY_FILE: file, CRS_ACCESS_TOKEN: s.credentials.accessToken },
      `${s.baseUrl}/nowhere`,
    );
    const thread = s.truth
      .threads()
      .find((t) => !s.truth.isRestricted(t.thread_id) && artifactOf(s, t.thread_id) !== undefined);
    const tid = thread?.thread_id as string;
    const aid = artifactOf(s, tid) as string;
    const { before, after } = rotate(s, 'apiKey', file);
    const got = await api.getArtifact(tid, aid);
    expect(got.fetched_via).toBe('legacy');
    expect(got.artifact).toEqual(s.truth.artifact(tid, aid)?.artifact);
    // The v2 404, the legacy 401, the legacy answer with the new key.
    expect(api.stats()).toMatchObject({ requests: 3, tokenRefreshes: 1 });
    expectNoSecret(logText(), before, after);
  });

  it.each([
    ['client secret', 'clientSecret', 'CRS_CLIENT_SECRET_FILE'],
    ['service-account token (the subject token)', 'serviceAccountToken', 'CRS_SERVICE_ACCOUNT_TOKEN_FILE'],
  ] as const)(
    'when the %s of a token exchange is rotated in its file, then the refused exchange reads it again and exchanges once more',
    async (_name, kind, setting) => {
      const s = await simulator();
      const file = secretFile(kind, s.credentials[kind]);
      const env: Record<string, string> = {
        CRS_TOKEN_URL: s.tokenUrl,
        CRS_CLIENT_ID: s.credentials.clientId,
        CRS_CLIENT_SECRET: s.credentials.clientSecret,
        CRS_SERVICE_ACCOUNT_TOKEN: s.credentials.serviceAccountToken,
      };
      delete env[setting.replace(/_FILE$/, '')];
      const { api, logText } = clientOf(s, { ...env, [setting]: file });
      await api.listThreads();
      const { before, after } = rotate(s, kind, file);
      // The exchanged token in hand runs out: the client must exchange again, with the old secret.
      s.setFaults('token-expiry=1');
      expect((await api.listThreads()).length).toBe(s.truth.threads().length);
      // 1st call: exchange + list; 2nd: list (401), exchange refused, exchange again, list.
      expect(api.stats()).toMatchObject({ requests: 6, tokenRefreshes: 1 });
      expect(logText()).toContain(`read again from ${setting}`);
      expectNoSecret(logText(), before, after);
    },
  );

  it('when the file still holds the refused token, then the call fails at once as unauthorized, and says so without the token', async () => {
    const s = await simulator();
    const file = secretFile('access-token', s.credentials.accessToken);
    const { api, logText } = clientOf(s, { CRS_ACCESS_TOKEN_FILE: file });
    const before = s.credentials.accessToken;
    s.rotateCredential('accessToken');
    await expect(api.listThreads()).rejects.toMatchObject({ code: 'HTTP_UNAUTHORIZED', retryable: false });
    expect(api.stats()).toMatchObject({ requests: 1, tokenRefreshes: 0 });
    expect(logText()).toContain(
      'the service refused CRS_ACCESS_TOKEN, and CRS_ACCESS_TOKEN_FILE still holds the same',
    );
    expectNoSecret(logText(), before, s.credentials.accessToken);
  });

  it('when the file is gone when it is read again, then the call fails as unauthorized and a warning names the setting and the path', async () => {
    const s = await simulator();
    const file = secretFile('access-token', s.credentials.accessToken);
    const { api, logText } = clientOf(s, { CRS_ACCESS_TOKEN_FILE: file });
    s.rotateCredential('accessToken');
    rmSync(file);
    await expect(api.listThreads()).rejects.toMatchObject({ code: 'HTTP_UNAUTHORIZED' });
    expect(logText()).toContain(
      `the service refused CRS_ACCESS_TOKEN, and it could not be read again: CRS_ACCESS_TOKEN_FILE: cannot read ${file} (no such file)`,
    );
  });
});

function artifactOf(s: Simulator, threadId: string): string | undefined {
  return s.truth.threadHistory(threadId)?.flatMap((e) => e.artifact_ids)[0];
}
