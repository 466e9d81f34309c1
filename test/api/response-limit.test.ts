import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServiceClient } from '../../src/api/index.ts';
import { CrsError } from '../../src/errors.ts';
import { client, SECRETS } from './helpers/client-setup.ts';
import { type ScriptedServer, sendJson, startScriptedServer } from './helpers/scripted-server.ts';

/**
 * Every JSON answer is read up to CRS_MAX_RESPONSE_BYTES (here 1 MiB) and no further, against a
 * real HTTP server that sends without end; the export stream is not bound by it.
 */
let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const LIMIT = 1024 * 1024;

/** What the server saw of an answer it tried to send without end. */
interface Endless {
  sent: number;
  /** True when the client dropped the connection before the answer was finished. */
  dropped: boolean;
}

/**
 * A 200 answer that starts like valid JSON and then sends spaces (valid JSON whitespace) until
 * the client goes away, or 1 GiB has gone out.
 */
function sendEndless(res: ServerResponse, start: string, log: Endless[]): void {
  const seen: Endless = { sent: 0, dropped: false };
  log.push(seen);
  res.writeHead(200, { 'content-type': 'application/json' });
  res.write(start);
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  const pump = () => {
    while (!res.destroyed && seen.sent < 1024 * LIMIT) {
      seen.sent += chunk.byteLength;
      if (!res.write(chunk)) return;
    }
    if (!res.destroyed) res.end(']}');
  };
  res.on('drain', pump);
  res.on('close', () => {
    seen.dropped = !res.writableFinished;
  });
  pump();
}

const THREAD = 'bbbbbbbb-0000-4000-8000-000000000001';

const surfaces: Array<{
  name: string;
  path: string;
  start: string;
  call: (api: ServiceClient) => Promise<unknown>;
  exchange?: boolean;
}> = [
  {
    name: 'a history page',
    path: `/v2/threads/${THREAD}/messages`,
    start: '{"messages":[',
    call: (api) => api.listMessages(THREAD),
  },
  {
    name: 'an artifact',
    path: `/v2/threads/${THREAD}/artifacts/a1`,
    start: '{"artifact":{"val":"',
    call: (api) => api.getArtifact(THREAD, 'a1'),
  },
  { name: 'the thread list', path: '/v2/threads', start: '{"threads":[', call: (api) => api.listThreads() },
  {
    name: 'a token exchange',
    path: '/oauth/token',
    start: '{"access_token":"',
    call: (api) => api.listThreads(),
    exchange: true,
  },
];

describe('response size limit', () => {
  for (const s of surfaces) {
    it(`when ${s.name} answers without end, then the read stops at the limit, the connection is dropped and the call fails once, not retried`, async () => {
      const endless: Endless[] = [];
      server = await startScriptedServer((req, res) => {
        if (req.path === s.path) return sendEndless(res, s.start, endless);
        sendJson(res, 200, { threads: [] });
      });
      const { api } = client(server.url, {
        maxResponseBytes: LIMIT,
        concurrency: 1,
        ...(s.exchange
          ? {
              accessToken: undefined,
              tokenUrl: `${server.url}/oauth/token`,
              clientId: 'c',
              clientSecret: SECRETS.clientSecret,
            }
          : {}),
      });
      const err = await s.call(api).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CrsError);
      const e = err as CrsError;
      expect(e.code).toBe('HTTP_BAD_RESPONSE');
      expect(e.retryable).toBe(false);
      expect(e.message).toContain('CRS_MAX_RESPONSE_BYTES');
      expect(e.message).toContain(`larger than ${LIMIT} bytes`);
      // One attempt: retrying would download the limit again for the same answer.
      expect(server.seen.filter((r) => r.path === s.path)).toHaveLength(1);
      await expect.poll(() => endless[0]?.dropped).toBe(true);
      // Far from the gigabyte the server was ready to send: the limit plus what socket buffers hold.
      expect(endless[0]!.sent).toBeLessThan(32 * LIMIT);
      expect(server.connections).toBe(1);
    });
  }

  it('when the answer declares a Content-Length above the limit, then it is refused before its body is read', async () => {
    server = await startScriptedServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(2 * LIMIT) });
      res.write('{"threads":[');
    });
    const { api } = client(server.url, { maxResponseBytes: LIMIT });
    const err = (await api.listThreads().catch((e: unknown) => e)) as CrsError;
    expect(err).toBeInstanceOf(CrsError);
    expect(err.code).toBe('HTTP_BAD_RESPONSE');
    expect(err.message).toContain(`it declares ${2 * LIMIT}, nothing was read`);
    expect(err.details).toMatchObject({ operation: 'listThreads', status: 200, maxResponseBytes: LIMIT });
  });

  it('when an answer is exactly at the limit, then it is read; one byte more, and it is refused', async () => {
    const body = (size: number) => {
      const head = '{"threads":[{"thread_id":"t1","pad":"';
      const tail = '"}]}';
      return head + 'x'.repeat(size - head.length - tail.length) + tail;
    };
    let size = LIMIT;
    server = await startScriptedServer((_req, res) => {
      // Chunked (no Content-Length): the limit is enforced on what arrives, not on a declaration.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body(size));
    });
    const { api } = client(server.url, { maxResponseBytes: LIMIT });
    expect((await api.listThreads()).map((t) => t.thread_id)).toEqual(['t1']);
    size = LIMIT + 1;
    const err = (await api.listThreads().catch((e: unknown) => e)) as CrsError;
    expect(err.code).toBe('HTTP_BAD_RESPONSE');
    expect(err.message).toContain('stopped reading after');
  });

  it('when a refused answer has dropped its connection, then the next call gets a new one and succeeds', async () => {
    const endless: Endless[] = [];
    server = await startScriptedServer((_req, res, n) => {
      if (n === 1) return sendEndless(res, '{"threads":[', endless);
      sendJson(res, 200, { threads: [{ thread_id: 't2' }] });
    });
    const { api } = client(server.url, { maxResponseBytes: LIMIT, concurrency: 1 });
    await expect(api.listThreads()).rejects.toMatchObject({ code: 'HTTP_BAD_RESPONSE' });
    expect((await api.listThreads()).map((t) => t.thread_id)).toEqual(['t2']);
    expect(server.connections).toBe(2);
  });

  it('when the export is larger than the limit, then it streams whole: it is read line by line, not bound by the limit', async () => {
    const line = `${JSON.stringify({ 'Message ID': 'm', Input: 'x'.repeat(1000) })}\n`;
    const text = line.repeat(Math.ceil((3 * LIMIT) / line.length));
    server = await startScriptedServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.end(text);
    });
    const { api } = client(server.url, { maxResponseBytes: LIMIT });
    const body = await api.exportMessages({ startDate: '2026-01-01', endDate: '2026-01-01' });
    let bytes = 0;
    for await (const c of body) bytes += c.byteLength;
    expect(bytes).toBe(Buffer.byteLength(text));
    expect(body.complete).toBe(true);
  });
});
