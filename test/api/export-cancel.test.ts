import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client } from './helpers/client-setup.ts';
import { type ScriptedServer, startScriptedServer } from './helpers/scripted-server.ts';

/**
 * An export body cancelled before it is read (the loader refuses an answer that is not an
 * export): no error may escape, since an unhandled error ends a worker process.
 */
let server: ScriptedServer;
beforeAll(async () => {
  server = await startScriptedServer((req, res) => {
    if (req.query.get('start_date') === '2026-01-02') {
      // A body that is still coming when the client gives up on it.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"error":"maintenance"');
      setTimeout(() => res.end('}\n'), 200);
      return;
    }
    // A whole small document, already received when the client gives up on it.
    const doc = '{"detail":"export temporarily unavailable"}\n';
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(doc) });
    res.end(doc);
  });
});
afterAll(async () => {
  await server?.close();
});

describe('export body cancelled before it is read', () => {
  it('when the body is cancelled unread, then no error escapes (the abort of an unread body would end a worker)', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    process.on('uncaughtException', onUnhandled);
    try {
      const { api } = client(server.url);
      for (const day of ['2026-01-02', '2026-01-03', '2026-01-02', '2026-01-03']) {
        const body = await api.exportMessages({ startDate: day, endDate: day });
        expect(body.contentType).toBe('application/json');
        // Let the rest of the answer arrive, as it does while the loader decides.
        await new Promise((resolve) => setTimeout(resolve, 50));
        await body.cancel();
      }
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(unhandled.map(String)).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      process.off('uncaughtException', onUnhandled);
    }
  });
});
