import { afterEach, describe, expect, it } from 'vitest';
import type { ServiceClient, ServiceClientOptions } from '../../src/api/index.ts';
import { createServiceClient } from '../../src/api/index.ts';
import { captureLog, options, SECRETS } from './helpers/client-setup.ts';
import { type ScriptedServer, type Seen, sendJson, startScriptedServer } from './helpers/scripted-server.ts';

/**
 * Every error path, against a hostile service that echoes back whatever credential it was sent
 * (headers and form fields) in its error bodies. No secret may reach an error's message, stack,
 * details or cause, nor any log line — including the line an operator's `log.error({ err })` writes.
 */
const T = '0b7c6f4e-1111-4222-8333-944455556666';
const EXCHANGED = 'exchanged-access-token-LMNOP-42';
const ALL_SECRETS = [...Object.values(SECRETS), EXCHANGED];

let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function echo(req: Seen) {
  const creds = [req.headers.authorization, req.headers['x-api-key'], req.body].filter(Boolean).join(' | ');
  return {
    detail: `rejected credentials: ${creds}`,
    message: `you sent ${req.headers.authorization ?? req.headers['x-api-key'] ?? req.body}`,
    error: { code: 'E', message: String(req.headers['x-api-key'] ?? '') },
    headers: req.headers,
    echo: req.body,
  };
}

type Case = {
  name: string;
  over?: Partial<ServiceClientOptions>;
  handler: (req: Seen, res: import('node:http').ServerResponse, n: number) => void;
  call: (api: ServiceClient) => Promise<unknown>;
  code: string;
};

const exchange = (url: string): Partial<ServiceClientOptions> => ({
  accessToken: undefined,
  tokenUrl: `${url}/oauth/token`,
  clientId: 'crs-sync-client',
  clientSecret: SECRETS.clientSecret,
});

const issueToken = (res: import('node:http').ServerResponse) =>
  sendJson(res, 200, { access_token: EXCHANGED, token_type: 'Bearer', expires_in: 3600 });

const drain = async (api: ServiceClient) => {
  const body = await api.exportMessages({ startDate: '2026-01-01', endDate: '2026-01-01' });
  for await (const _ of body) {
    /* drain */
  }
};

const cases: Case[] = [
  {
    name: 'export answered 401',
    handler: (req, res) => sendJson(res, 401, echo(req)),
    call: drain,
    code: 'HTTP_UNAUTHORIZED',
  },
  {
    name: 'v2 answered 401 after the refresh',
    handler: (req, res) => (req.path === '/oauth/token' ? issueToken(res) : sendJson(res, 401, echo(req))),
    call: (api) => api.listThreads(),
    code: 'HTTP_UNAUTHORIZED',
  },
  {
    name: 'token exchange refused with the form echoed',
    handler: (req, res) =>
      sendJson(res, 400, { ...echo(req), error: 'invalid_grant', error_description: `bad form ${req.body}` }),
    call: (api) => api.listThreads(),
    code: 'HTTP_UNAUTHORIZED',
  },
  {
    name: 'token exchange answered a token_type that is a secret',
    handler: (_req, res) => sendJson(res, 200, { access_token: EXCHANGED, token_type: SECRETS.clientSecret }),
    call: (api) => api.listThreads(),
    code: 'HTTP_BAD_RESPONSE',
  },
  ...(
    [
      [403, 'HTTP_FORBIDDEN'],
      [404, 'HTTP_NOT_FOUND'],
      [422, 'HTTP_UNPROCESSABLE'],
      [500, 'HTTP_SERVER'],
      [429, 'HTTP_THROTTLED'],
    ] as const
  ).map(
    ([status, code]): Case => ({
      name: `history answered ${status}`,
      handler: (req, res) =>
        req.path === '/oauth/token'
          ? issueToken(res)
          : sendJson(res, status, echo(req), { 'retry-after': '0' }),
      call: (api) => api.listMessages(T),
      code,
    }),
  ),
  {
    name: 'a non-JSON error body echoing the token',
    handler: (req, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`Authorization: ${req.headers.authorization}`);
    },
    call: drain,
    code: 'HTTP_SERVER',
  },
  {
    name: 'legacy artifact answered 401 with the API key echoed',
    over: {},
    handler: (req, res) => {
      if (req.path === '/oauth/token') return issueToken(res);
      if (req.path.startsWith('/v2/')) return sendJson(res, 404, echo(req));
      sendJson(res, 401, echo(req));
    },
    call: (api) => api.getArtifact(T, 'art-1'),
    code: 'HTTP_UNAUTHORIZED',
  },
  {
    name: 'the connection dropped',
    handler: (_req, res) => void res.socket?.destroy(),
    call: (api) => api.listThreads(),
    code: 'HTTP_NETWORK',
  },
  {
    name: 'no answer in time',
    over: { timeoutMs: 100 },
    handler: () => {},
    call: drain,
    code: 'HTTP_TIMEOUT',
  },
  {
    name: 'the export stream cut mid-body',
    handler: (req, res) => {
      res.writeHead(200);
      res.write(`{"echo": "${req.headers.authorization}"`);
      setTimeout(() => res.socket?.destroy(), 10);
    },
    call: drain,
    code: 'STREAM_CUT',
  },
];

describe('no secret in errors or logs', () => {
  for (const c of cases) {
    it(`when ${c.name}, then no token, key or secret appears in the error or the log`, async () => {
      server = await startScriptedServer((req, res, n) => c.handler(req, res, n));
      const { log, text } = captureLog();
      const api = createServiceClient(
        options(server.url, {
          ...exchange(server.url),
          legacyBaseUrl: `${server.url}/legacy`,
          apiKey: SECRETS.apiKey,
          maxRetries: 1,
          ...c.over,
        }),
        log,
      );
      const err = await c.call(api).then(
        () => undefined,
        (e: unknown) => e as Error & { details?: unknown; code?: string },
      );
      expect(err?.code).toBe(c.code);
      // What a caller would do with it:
      log.error({ err }, 'operation failed');
      const cause = (err as { cause?: unknown }).cause;
      const surfaces = [
        err?.message ?? '',
        err?.stack ?? '',
        JSON.stringify(err?.details ?? {}),
        cause instanceof Error ? `${cause.message} ${cause.stack}` : String(cause),
        text(),
      ];
      // The server really did receive (and echo) a credential:
      expect(server.seen.some((s) => ALL_SECRETS.some((x) => JSON.stringify(s).includes(x)))).toBe(true);
      for (const surface of surfaces) for (const secret of ALL_SECRETS) expect(surface).not.toContain(secret);
    });
  }
});

describe('redirects', () => {
  it('when the legacy API redirects to another host, then the API key is not sent there and the call fails clearly', async () => {
    const elsewhere = await startScriptedServer((_req, res) =>
      sendJson(res, 200, { artifact_id: 'a', artifact: {} }),
    );
    server = await startScriptedServer((req, res) => {
      if (req.path.startsWith('/v2/')) return sendJson(res, 404, { detail: 'no' });
      res.writeHead(302, { location: `${elsewhere.url}/steal` });
      res.end();
    });
    try {
      const { log } = captureLog();
      const api = createServiceClient(
        options(server.url, { legacyBaseUrl: `${server.url}/legacy`, apiKey: SECRETS.apiKey }),
        log,
      );
      const err = await api.getArtifact(T, 'art-1').catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'HTTP_CLIENT', retryable: false, details: { status: 302 } });
      expect((err as Error).message).toContain('getArtifact.legacy failed: HTTP 302 Redirect (not followed)');
      expect(elsewhere.seen).toHaveLength(0);
    } finally {
      await elsewhere.close();
    }
  });
});
