import { afterEach, describe, expect, it } from 'vitest';
import { client } from './helpers/client-setup.ts';
import { type ScriptedServer, sendJson, startScriptedServer } from './helpers/scripted-server.ts';

const T = '0b7c6f4e-1111-4222-8333-944455556666';
let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** The `delayMs` of every "retrying" log line, in order. */
function retryDelays(logText: string): number[] {
  return logText
    .split('\n')
    .filter((l) => l.includes('retrying'))
    .map((l) => (JSON.parse(l) as { delayMs: number }).delayMs);
}

describe('retries', () => {
  for (const status of [500, 502, 503, 504, 429, 408]) {
    it(`when the service answers ${status} twice, then the call is retried and succeeds on the third attempt`, async () => {
      server = await startScriptedServer((_req, res, n) =>
        n <= 2 ? sendJson(res, status, { detail: 'busy' }) : sendJson(res, 200, { threads: [] }),
      );
      const { api } = client(server.url);
      await expect(api.listThreads()).resolves.toEqual([]);
      expect(server.seen).toHaveLength(3);
      expect(api.stats().retries).toBe(2);
    });
  }

  it('when the connection is dropped before an answer, then it is retried as a network error', async () => {
    server = await startScriptedServer((_req, res, n) => {
      if (n === 1) return void res.socket?.destroy();
      sendJson(res, 200, { threads: [] });
    });
    const { api, logText } = client(server.url);
    await expect(api.listThreads()).resolves.toEqual([]);
    expect(server.seen).toHaveLength(2);
    expect(logText()).toContain('"code":"HTTP_NETWORK"');
  });

  it('when a JSON body is cut mid-way, then the request is retried', async () => {
    server = await startScriptedServer((_req, res, n) => {
      if (n === 1) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
        res.write('{"threads": [');
        setTimeout(() => res.socket?.destroy(), 10);
        return;
      }
      sendJson(res, 200, { threads: [] });
    });
    const { api } = client(server.url);
    await expect(api.listThreads()).resolves.toEqual([]);
    expect(server.seen).toHaveLength(2);
  });

  it('when 5xx persists, then HTTP_SERVER (retryable) is thrown after maxRetries + 1 attempts', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 503, { detail: 'down' }));
    const { api } = client(server.url, { maxRetries: 2 });
    const err = await api.listThreads().catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'HTTP_SERVER',
      retryable: true,
      details: { status: 503, attempts: 3 },
    });
    expect((err as Error).message).toBe('listThreads failed: HTTP 503 Server Error (after 3 requests): down');
    expect(server.seen).toHaveLength(3);
  });

  it('when 429 persists, then HTTP_THROTTLED (retryable) is thrown', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 429, {}, { 'retry-after': '0' }));
    const { api } = client(server.url, { maxRetries: 1 });
    await expect(api.listThreads()).rejects.toMatchObject({ code: 'HTTP_THROTTLED', retryable: true });
    expect(server.seen).toHaveLength(2);
  });

  for (const [status, code] of [
    [401, 'HTTP_UNAUTHORIZED'],
    [403, 'HTTP_FORBIDDEN'],
    [404, 'HTTP_NOT_FOUND'],
    [422, 'HTTP_UNPROCESSABLE'],
    [400, 'HTTP_CLIENT'],
  ] as const) {
    it(`when the service answers ${status}, then ${code} is thrown at once with operation and status`, async () => {
      server = await startScriptedServer((_req, res) =>
        sendJson(res, status, { detail: [{ loc: ['query', 'limit_num'], msg: 'too big', type: 'x' }] }),
      );
      const { api } = client(server.url);
      const err = await api.listMessages(T).catch((e: unknown) => e);
      expect(err).toMatchObject({ code, retryable: false, details: { operation: 'listMessages', status } });
      expect((err as Error).message).toMatch(new RegExp(`^listMessages failed: HTTP ${status}`));
      expect((err as Error).message).toContain('query.limit_num: too big');
      expect(server.seen).toHaveLength(1);
    });
  }

  it('when the service sends Retry-After in seconds, then the wait before the retry is that long', async () => {
    server = await startScriptedServer((_req, res, n) =>
      n === 1 ? sendJson(res, 429, {}, { 'retry-after': '1' }) : sendJson(res, 200, { threads: [] }),
    );
    const { api, logText } = client(server.url);
    await api.listThreads();
    expect(retryDelays(logText())).toEqual([1000]);
  });

  it('when Retry-After is an HTTP date, then the wait is the time until it', async () => {
    const at = new Date(Date.now() + 40_000);
    server = await startScriptedServer((_req, res) =>
      sendJson(res, 503, {}, { 'retry-after': at.toUTCString() }),
    );
    const { api, logText } = client(server.url);
    const ctrl = new AbortController();
    const call = api.listThreads({ signal: ctrl.signal });
    // No need to sit out the wait: once the retry is scheduled (and logged), cancel it.
    while (retryDelays(logText()).length === 0) await new Promise((r) => setTimeout(r, 5));
    ctrl.abort();
    await expect(call).rejects.toMatchObject({ code: 'CANCELLED' });
    const [d] = retryDelays(logText());
    // The date has whole seconds (up to 1 s before `at`), and some time passed before it was read.
    expect(d).toBeGreaterThan(20_000);
    expect(d).toBeLessThanOrEqual(40_000);
  });

  it('when Retry-After exceeds the configured maximum, then the wait is capped at the maximum', async () => {
    server = await startScriptedServer((_req, res, n) =>
      n === 1 ? sendJson(res, 429, {}, { 'retry-after': '3600' }) : sendJson(res, 200, { threads: [] }),
    );
    const { api, logText } = client(server.url, { maxRetryAfterMs: 50 });
    await api.listThreads();
    expect(retryDelays(logText())).toEqual([50]);
  });

  it('when no Retry-After is sent, then backoff delays follow full jitter under base·2^n capped', async () => {
    server = await startScriptedServer((_req, res, n) =>
      n <= 4 ? sendJson(res, 500, {}) : sendJson(res, 200, { threads: [] }),
    );
    // random() = 0.999… puts each delay at the top of its range: floor(min(cap, base·2^n)·0.999).
    const { api, logText } = client(server.url, {
      maxRetries: 4,
      baseBackoffMs: 10,
      maxBackoffMs: 50,
      random: () => 0.999,
    });
    await api.listThreads();
    expect(retryDelays(logText())).toEqual([9, 19, 39, 49]);
  });

  it('when the server does not answer within timeoutMs, then HTTP_TIMEOUT (retryable) after the retries', async () => {
    server = await startScriptedServer(() => {
      /* never answers */
    });
    const { api } = client(server.url, { timeoutMs: 100, maxRetries: 1 });
    await expect(api.listThreads()).rejects.toMatchObject({ code: 'HTTP_TIMEOUT', retryable: true });
    expect(server.seen).toHaveLength(2);
  });

  it('when the caller aborts during a backoff wait, then CANCELLED is thrown and no further attempt starts', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 503, {}, { 'retry-after': '30' }));
    const { api } = client(server.url);
    const ctrl = new AbortController();
    const p = api.listThreads({ signal: ctrl.signal });
    while (server.seen.length === 0) await new Promise((r) => setTimeout(r, 5));
    ctrl.abort();
    await expect(p).rejects.toMatchObject({ code: 'CANCELLED', retryable: false });
    expect(server.seen).toHaveLength(1);
  });

  it('when the caller aborts while the request is in flight, then CANCELLED is thrown', async () => {
    server = await startScriptedServer(() => {
      /* never answers */
    });
    const { api } = client(server.url);
    const ctrl = new AbortController();
    const p = api.listMessages(T, { signal: ctrl.signal });
    while (server.seen.length === 0) await new Promise((r) => setTimeout(r, 5));
    ctrl.abort();
    await expect(p).rejects.toMatchObject({ code: 'CANCELLED' });
  });

  it('when the signal is already aborted, then no request is made', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { threads: [] }));
    const { api } = client(server.url);
    await expect(api.listThreads({ signal: AbortSignal.abort() })).rejects.toMatchObject({
      code: 'CANCELLED',
    });
    expect(server.seen).toHaveLength(0);
  });
});
