import { afterEach, describe, expect, it } from 'vitest';
import { CrsError } from '../../src/errors.ts';
import { client, SECRETS } from './helpers/client-setup.ts';
import { type ScriptedServer, sendJson, startScriptedServer } from './helpers/scripted-server.ts';

const T = '0b7c6f4e-1111-4222-8333-944455556666';
let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const entries = (from: number, n: number) =>
  Array.from({ length: n }, (_, i) => ({ message_id: `m${from + i}`, citations: [] }));

describe('thread endpoints', () => {
  it('when listing threads, then GET /v2/threads with the access token returns the threads array', async () => {
    server = await startScriptedServer((_req, res) =>
      sendJson(res, 200, { threads: [{ thread_id: T, thread_name: 'a' }, { no_id: true }] }),
    );
    const { api } = client(server.url);
    const threads = await api.listThreads();
    expect(threads).toEqual([{ thread_id: T, thread_name: 'a' }]);
    expect(server.seen[0]?.path).toBe('/v2/threads');
    expect(server.seen[0]?.headers.authorization).toBe(`Bearer ${SECRETS.accessToken}`);
  });

  it('when listing messages, then start_index and limit_num are sent and the messages returned', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { messages: entries(5, 2) }));
    const { api } = client(server.url);
    const msgs = await api.listMessages(T, { startIndex: 5, limitNum: 2 });
    expect(msgs.map((m) => (m as { message_id: string }).message_id)).toEqual(['m5', 'm6']);
    expect(server.seen[0]?.path).toBe(`/v2/threads/${T}/messages`);
    expect(server.seen[0]?.query.get('start_index')).toBe('5');
    expect(server.seen[0]?.query.get('limit_num')).toBe('2');
  });

  it('when limitNum exceeds MAX_PAGE_SIZE, then a USAGE error is thrown without a request', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { messages: [] }));
    const { api } = client(server.url);
    await expect(api.listMessages(T, { limitNum: 101 })).rejects.toMatchObject({ code: 'USAGE' });
    expect(server.seen).toHaveLength(0);
  });

  it('when the answer has no messages array, then HTTP_BAD_RESPONSE (not retried)', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { items: [] }));
    const { api } = client(server.url);
    await expect(api.listMessages(T)).rejects.toMatchObject({ code: 'HTTP_BAD_RESPONSE', retryable: false });
    expect(server.seen).toHaveLength(1);
  });

  it('when history has 7 entries and pages are 3, then historyFrom yields 3, 3, 1 and stops', async () => {
    const all = entries(0, 7);
    server = await startScriptedServer((req, res) => {
      const s = Number(req.query.get('start_index'));
      const n = Number(req.query.get('limit_num'));
      sendJson(res, 200, { messages: all.slice(s, s + n) });
    });
    const { api } = client(server.url);
    const pages = [];
    for await (const p of api.historyFrom(T, 0, 3)) pages.push(p);
    expect(pages.map((p) => [p.startIndex, p.messages.length, p.nextIndex, p.last])).toEqual([
      [0, 3, 3, false],
      [3, 3, 6, false],
      [6, 1, 7, true],
    ]);
    expect(server.seen.map((s) => s.query.get('start_index'))).toEqual(['0', '3', '6']);
  });

  it('when history length is a multiple of the page size, then paging ends on an empty page', async () => {
    const all = entries(0, 6);
    server = await startScriptedServer((req, res) => {
      const s = Number(req.query.get('start_index'));
      sendJson(res, 200, { messages: all.slice(s, s + 3) });
    });
    const { api } = client(server.url);
    const sizes = [];
    for await (const p of api.historyFrom(T, 0, 3)) sizes.push(p.messages.length);
    expect(sizes).toEqual([3, 3, 0]);
  });

  it('when historyFrom starts at a stored position, then the first request uses that start_index', async () => {
    const all = entries(0, 12);
    server = await startScriptedServer((req, res) => {
      const s = Number(req.query.get('start_index'));
      sendJson(res, 200, { messages: all.slice(s, s + 5) });
    });
    const { api } = client(server.url);
    const ids = [];
    for await (const p of api.historyFrom(T, 10, 5))
      ids.push(...p.messages.map((m) => (m as { message_id: string }).message_id));
    expect(ids).toEqual(['m10', 'm11']);
    expect(server.seen).toHaveLength(1);
  });
});

describe('getArtifact', () => {
  const artifact = { output_type: 'text', title: '', citations: [], val: 'v', resolved_text_objects: true };

  it('when v2 answers, then the artifact comes back fetched_via v2', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { artifact }));
    const { api } = client(server.url, { legacyBaseUrl: 'http://127.0.0.1:9', apiKey: SECRETS.apiKey });
    const r = await api.getArtifact(T, 'art-1');
    expect(r).toEqual({ artifact_id: 'art-1', artifact, fetched_via: 'v2' });
    expect(server.seen[0]?.path).toBe(`/v2/threads/${T}/artifacts/art-1`);
  });

  for (const status of [404, 405]) {
    it(`when v2 answers ${status} and an API key is set, then the legacy path serves it with x-api-key`, async () => {
      server = await startScriptedServer((req, res) => {
        if (req.path.startsWith('/v2/')) return sendJson(res, status, { detail: 'no' });
        sendJson(res, 200, { artifact_id: 'art-1', artifact });
      });
      const { api } = client(server.url, { legacyBaseUrl: `${server.url}/legacy`, apiKey: SECRETS.apiKey });
      const r = await api.getArtifact(T, 'art-1');
      expect(r.fetched_via).toBe('legacy');
      expect(r.artifact).toEqual(artifact);
      const legacy = server.seen[1];
      expect(legacy?.path).toBe(`/legacy/client/v2/thread/${T}/artifact/art-1`);
      expect(legacy?.headers['x-api-key']).toBe(SECRETS.apiKey);
      expect(legacy?.headers.authorization).toBeUndefined();
    });
  }

  it('when v2 answers 404 and no API key is set, then HTTP_NOT_FOUND names the operation', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 404, { detail: 'Thread not found' }));
    const { api } = client(server.url);
    const err = await api.getArtifact(T, 'art-1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CrsError);
    expect(err).toMatchObject({ code: 'HTTP_NOT_FOUND', retryable: false });
    expect((err as Error).message).toContain('getArtifact failed: HTTP 404');
    expect((err as Error).message).toContain('Thread not found');
    expect(server.seen).toHaveLength(1);
  });

  it('when v2 answers 403, then no legacy fallback happens and HTTP_FORBIDDEN is thrown', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 403, { detail: 'restricted' }));
    const { api } = client(server.url, { legacyBaseUrl: `${server.url}/legacy`, apiKey: SECRETS.apiKey });
    await expect(api.getArtifact(T, 'a')).rejects.toMatchObject({ code: 'HTTP_FORBIDDEN' });
    expect(server.seen).toHaveLength(1);
  });
});

describe('historyFrom guard', () => {
  it('when the service ignores start_index, then paging stops with HTTP_BAD_RESPONSE instead of looping', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { messages: entries(0, 3) }));
    const { api } = client(server.url);
    const pages: unknown[] = [];
    const err = await (async () => {
      for await (const p of api.historyFrom(T, 0, 3)) pages.push(p);
    })().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'HTTP_BAD_RESPONSE' });
    expect(pages).toHaveLength(1);
    expect(server.seen).toHaveLength(2);
  });
});
