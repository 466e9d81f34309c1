import { afterEach, describe, expect, it } from 'vitest';
import { JWT_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT } from '../../src/api/credentials.ts';
import type { ServiceClientOptions } from '../../src/api/index.ts';
import { client, SECRETS } from './helpers/client-setup.ts';
import { type ScriptedServer, type Seen, sendJson, startScriptedServer } from './helpers/scripted-server.ts';

const T = '0b7c6f4e-1111-4222-8333-944455556666';
let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/**
 * A service with a token endpoint: it issues tok-1, tok-2, … and accepts only the tokens in
 * `valid` on the thread API.
 */
async function exchangeService(opts: {
  expiresIn?: number;
  valid?: (token: string) => boolean;
  delayMs?: number;
}) {
  let issued = 0;
  const s = await startScriptedServer(async (req, res) => {
    if (req.path === '/oauth/token') {
      if (opts.delayMs) await new Promise((r) => setTimeout(r, opts.delayMs));
      issued++;
      return sendJson(res, 200, {
        access_token: `exchanged-token-${issued}`,
        issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        token_type: 'Bearer',
        expires_in: opts.expiresIn ?? 3600,
      });
    }
    const token = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    if (opts.valid && !opts.valid(token)) return sendJson(res, 401, { detail: 'token expired' });
    sendJson(res, 200, { threads: [], messages: [] });
  });
  return s;
}

function exchangeConfig(
  url: string,
  over: Partial<ServiceClientOptions> = {},
): Partial<ServiceClientOptions> {
  return {
    accessToken: undefined,
    tokenUrl: `${url}/oauth/token`,
    clientId: 'crs-sync-client',
    clientSecret: SECRETS.clientSecret,
    ...over,
  };
}

const tokenRequests = (seen: Seen[]) => seen.filter((s) => s.path === '/oauth/token');
const apiRequests = (seen: Seen[]) => seen.filter((s) => s.path !== '/oauth/token');

describe('auth schemes (spec §5)', () => {
  it('when exporting, then the service-account JWT is the bearer token', async () => {
    server = await startScriptedServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.end('');
    });
    const { api } = client(server.url);
    const body = await api.exportMessages({ startDate: '2026-01-01', endDate: '2026-01-01' });
    for await (const _ of body) {
      /* drain */
    }
    expect(server.seen[0]?.headers.authorization).toBe(`Bearer ${SECRETS.serviceAccountToken}`);
  });

  it('when a static access token is configured, then v2 calls carry it and no exchange happens', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { threads: [] }));
    const { api } = client(server.url, {
      tokenUrl: `${server.url}/oauth/token`,
      clientId: 'c',
      clientSecret: 'x'.repeat(8),
    });
    await api.listThreads();
    expect(server.seen.map((s) => s.path)).toEqual(['/v2/threads']);
    expect(server.seen[0]?.headers.authorization).toBe(`Bearer ${SECRETS.accessToken}`);
  });

  it('when a static access token is rejected, then HTTP_UNAUTHORIZED at once (nothing to refresh)', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 401, { detail: 'bad' }));
    const { api } = client(server.url);
    await expect(api.listThreads()).rejects.toMatchObject({ code: 'HTTP_UNAUTHORIZED', retryable: false });
    expect(server.seen).toHaveLength(1);
  });

  it('when no v2 credential is configured, then CONFIG_INVALID names the variables and no request is made', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { threads: [] }));
    const { api } = client(server.url, { accessToken: undefined });
    const err = await api.listThreads().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'CONFIG_INVALID' });
    expect((err as Error).message).toContain('CRS_ACCESS_TOKEN');
    expect(server.seen).toHaveLength(0);
  });
});

describe('token exchange (RFC 8693)', () => {
  it('when the first v2 call is made, then the token endpoint gets exactly the RFC 8693 form', async () => {
    server = await exchangeService({});
    const { api } = client(server.url, exchangeConfig(server.url));
    await api.listThreads();
    const [tr] = tokenRequests(server.seen);
    expect(tr?.method).toBe('POST');
    expect(tr?.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(Object.fromEntries(new URLSearchParams(tr?.body))).toEqual({
      grant_type: TOKEN_EXCHANGE_GRANT,
      client_id: 'crs-sync-client',
      client_secret: SECRETS.clientSecret,
      subject_token: SECRETS.serviceAccountToken,
      subject_token_type: JWT_TOKEN_TYPE,
    });
    expect(apiRequests(server.seen)[0]?.headers.authorization).toBe('Bearer exchanged-token-1');
  });

  it('when many calls are made, then the token is cached and exchanged once', async () => {
    server = await exchangeService({});
    const { api } = client(server.url, exchangeConfig(server.url));
    for (let i = 0; i < 5; i++) await api.listThreads();
    expect(tokenRequests(server.seen)).toHaveLength(1);
    expect(apiRequests(server.seen)).toHaveLength(5);
  });

  it('when 20 callers start at once, then they share one in-flight exchange', async () => {
    server = await exchangeService({ delayMs: 50 });
    const { api } = client(server.url, exchangeConfig(server.url));
    await Promise.all(Array.from({ length: 20 }, () => api.listMessages(T)));
    expect(tokenRequests(server.seen)).toHaveLength(1);
    expect(new Set(apiRequests(server.seen).map((s) => s.headers.authorization))).toEqual(
      new Set(['Bearer exchanged-token-1']),
    );
  });

  it('when the token is about to expire, then the next call exchanges a new one first', async () => {
    // expires_in 1 s: refreshed at half its lifetime at the latest, so a call 600 ms later renews.
    server = await exchangeService({ expiresIn: 1 });
    const { api } = client(server.url, exchangeConfig(server.url));
    await api.listThreads();
    await new Promise((r) => setTimeout(r, 600));
    await api.listThreads();
    expect(tokenRequests(server.seen)).toHaveLength(2);
    expect(apiRequests(server.seen)[1]?.headers.authorization).toBe('Bearer exchanged-token-2');
  });

  it('when the service rejects the cached token with 401, then it is refreshed once and the call succeeds', async () => {
    server = await exchangeService({ valid: (t) => t !== 'exchanged-token-1' });
    const { api } = client(server.url, exchangeConfig(server.url));
    await expect(api.listThreads()).resolves.toEqual([]);
    expect(server.seen.map((s) => s.path)).toEqual([
      '/oauth/token',
      '/v2/threads',
      '/oauth/token',
      '/v2/threads',
    ]);
    expect(api.stats().tokenRefreshes).toBe(1);
  });

  it('when the refreshed token is rejected too, then HTTP_UNAUTHORIZED says so and nothing more is tried', async () => {
    server = await exchangeService({ valid: () => false });
    const { api } = client(server.url, exchangeConfig(server.url));
    const err = await api.listMessages(T).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'HTTP_UNAUTHORIZED', retryable: false, details: { status: 401 } });
    expect((err as Error).message).toContain('listMessages failed: HTTP 401');
    expect((err as Error).message).toContain('after refreshing the access token');
    expect(tokenRequests(server.seen)).toHaveLength(2);
    expect(apiRequests(server.seen)).toHaveLength(2);
  });

  it('when concurrent calls all get 401 with the same token, then one refresh serves them all', async () => {
    server = await exchangeService({ valid: (t) => t !== 'exchanged-token-1', delayMs: 20 });
    const { api } = client(server.url, exchangeConfig(server.url));
    await Promise.all(Array.from({ length: 10 }, () => api.listThreads()));
    expect(tokenRequests(server.seen)).toHaveLength(2);
  });

  it('when the token endpoint refuses the client (400 invalid_client), then HTTP_UNAUTHORIZED, not retried', async () => {
    server = await startScriptedServer((_req, res) =>
      sendJson(res, 400, { error: 'invalid_client', error_description: 'unknown client' }),
    );
    const { api } = client(server.url, exchangeConfig(server.url));
    const err = await api.listThreads().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'HTTP_UNAUTHORIZED', retryable: false });
    expect((err as Error).message).toContain('tokenExchange failed: HTTP 400');
    expect((err as Error).message).toContain('invalid_client — unknown client');
    expect(server.seen).toHaveLength(1);
  });

  it('when the token endpoint fails with 503 once, then the exchange is retried', async () => {
    server = await startScriptedServer((req, res, n) => {
      if (n === 1) return sendJson(res, 503, {});
      if (req.path === '/oauth/token')
        return sendJson(res, 200, {
          access_token: 'exchanged-token-9',
          token_type: 'Bearer',
          expires_in: 60,
        });
      sendJson(res, 200, { threads: [] });
    });
    const { api } = client(server.url, exchangeConfig(server.url));
    await api.listThreads();
    expect(server.seen.map((s) => s.path)).toEqual(['/oauth/token', '/oauth/token', '/v2/threads']);
  });

  it('when the token answer has no access_token, then HTTP_BAD_RESPONSE', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { token_type: 'Bearer' }));
    const { api } = client(server.url, exchangeConfig(server.url));
    await expect(api.listThreads()).rejects.toMatchObject({ code: 'HTTP_BAD_RESPONSE' });
  });
});
