import { afterEach, describe, expect, it } from 'vitest';
import { client } from './helpers/client-setup.ts';
import { type ScriptedServer, sendJson, startScriptedServer } from './helpers/scripted-server.ts';

let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('connections', () => {
  it('when 40 calls are made with a concurrency of 4, then they share at most 4 kept-alive connections', async () => {
    server = await startScriptedServer((_req, res) => sendJson(res, 200, { threads: [] }));
    const { api } = client(server.url, { concurrency: 4 });
    await Promise.all(Array.from({ length: 20 }, () => api.listThreads()));
    for (let i = 0; i < 20; i++) await api.listThreads();
    expect(server.seen).toHaveLength(40);
    expect(server.connections).toBeGreaterThan(0);
    expect(server.connections).toBeLessThanOrEqual(4);
  });

  it('when an error body is far larger than 64 KiB, then it is not downloaded whole, the status is reported and the next call succeeds', async () => {
    const chunk = `${'x'.repeat(64 * 1024 - 1)}\n`;
    const chunks = 128; // 8 MiB
    let writtenWhole: boolean | undefined;
    server = await startScriptedServer(async (_req, res, n) => {
      if (n > 1) return sendJson(res, 200, { threads: [] });
      res.writeHead(404, { 'content-type': 'text/plain', 'content-length': chunk.length * chunks });
      res.on('close', () => {
        writtenWhole = res.writableFinished;
      });
      for (let i = 0; i < chunks && !res.destroyed; i++) {
        // Each wait takes its listeners off again: left on, a close listener per wait piled up
        // past Node's limit of ten (MaxListenersExceededWarning in CI's output).
        if (!res.write(chunk)) {
          await new Promise<void>((resolve) => {
            const done = () => {
              res.off('drain', done).off('close', done);
              resolve();
            };
            res.on('drain', done).on('close', done);
          });
        }
      }
      res.end();
    });
    const { api } = client(server.url);
    await expect(api.listThreads()).rejects.toMatchObject({
      code: 'HTTP_NOT_FOUND',
      details: { operation: 'listThreads', status: 404 },
    });
    await expect(api.listThreads()).resolves.toEqual([]);
    await expect.poll(() => writtenWhole).toBe(false);
  });
});
