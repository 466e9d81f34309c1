import { afterEach, describe, expect, it } from 'vitest';
import { CrsError } from '../../src/errors.ts';
import { client } from './helpers/client-setup.ts';
import { type ScriptedServer, sendJson, startScriptedServer } from './helpers/scripted-server.ts';

let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const line = (i: number) => `${JSON.stringify({ 'Message ID': `m-${i}`, Input: 'x'.repeat(200) })}\n`;
const lines = (n: number) => Array.from({ length: n }, (_, i) => line(i)).join('');

async function drain(body: AsyncIterable<Uint8Array>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of body) parts.push(Buffer.from(c));
  return Buffer.concat(parts).toString('utf8');
}

describe('exportMessages', () => {
  it('when a day is exported, then both dates are sent and the body, file name and byte count come back', async () => {
    const text = lines(50);
    server = await startScriptedServer((_req, res) => {
      res.writeHead(200, {
        'content-type': 'application/x-ndjson',
        'content-disposition': 'attachment; filename="message_history_20260102T030405Z.jsonl"',
      });
      res.end(text);
    });
    const { api } = client(server.url);
    const body = await api.exportMessages({ startDate: '2026-01-01', endDate: '2026-01-01' });
    expect(body.status).toBe(200);
    expect(body.fileName).toBe('message_history_20260102T030405Z.jsonl');
    expect(await drain(body)).toBe(text);
    expect(body.bytesRead).toBe(Buffer.byteLength(text));
    expect(body.complete).toBe(true);
    expect(server.seen[0]?.path).toBe('/v2/analytics/messages');
    expect(server.seen[0]?.query.get('start_date')).toBe('2026-01-01');
    expect(server.seen[0]?.query.get('end_date')).toBe('2026-01-01');
  });

  it('when read as a Node stream, then it yields the same bytes', async () => {
    const text = lines(20);
    server = await startScriptedServer((_req, res) => void res.end(text));
    const { api } = client(server.url);
    const body = await api.exportMessages({ startDate: '2026-01-01', endDate: '2026-01-03' });
    const parts: Buffer[] = [];
    for await (const c of body.toNodeStream()) parts.push(c as Buffer);
    expect(Buffer.concat(parts).toString()).toBe(text);
  });

  it('when the service fails with 503 before the body starts, then the request is retried', async () => {
    server = await startScriptedServer((_req, res, n) => {
      if (n === 1) return sendJson(res, 503, { detail: 'busy' }, { 'retry-after': '0' });
      res.end(line(1));
    });
    const { api } = client(server.url);
    const body = await api.exportMessages({ startDate: '2026-01-01', endDate: '2026-01-01' });
    expect(await drain(body)).toBe(line(1));
    expect(body.attempts).toBe(2);
  });

  it('when the connection is cut mid-body, then the iterator throws STREAM_CUT (retryable) and no retry is made', async () => {
    const text = lines(400);
    server = await startScriptedServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write(text.slice(0, 30_000)); // ends mid-line
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const { api } = client(server.url);
    const body = await api.exportMessages({ startDate: '2026-01-01', endDate: '2026-01-01' });
    let received = 0;
    const err = await (async () => {
      for await (const c of body) received += c.byteLength;
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CrsError);
    expect(err).toMatchObject({ code: 'STREAM_CUT', retryable: true });
    expect(received).toBe(30_000);
    expect(body.bytesRead).toBe(30_000);
    expect(body.complete).toBe(false);
    expect(server.seen).toHaveLength(1);
  });

  it('when the body ends before its Content-Length, then STREAM_CUT', async () => {
    server = await startScriptedServer((_req, res) => {
      res.writeHead(200, { 'content-length': '5000' });
      res.write(line(1));
      setTimeout(() => res.socket?.end(), 20);
    });
    const { api } = client(server.url);
    const body = await api.exportMessages({ startDate: '2026-01-01', endDate: '2026-01-01' });
    await expect(drain(body)).rejects.toMatchObject({ code: 'STREAM_CUT' });
  });

  it('when the body stalls longer than the timeout, then STREAM_CUT', async () => {
    server = await startScriptedServer((_req, res) => {
      res.writeHead(200);
      res.write(line(1)); // then silence
    });
    const { api } = client(server.url, { timeoutMs: 150 });
    const body = await api.exportMessages({ startDate: '2026-01-01', endDate: '2026-01-01' });
    const err = await drain(body).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'STREAM_CUT', retryable: true });
    expect((err as Error).message).toContain('no data for 150 ms');
  });

  it('when the consumer stops early, then the connection slot is given back', async () => {
    server = await startScriptedServer((_req, res) => {
      res.writeHead(200);
      res.write(lines(10)); // never ends
    });
    const { api } = client(server.url, { concurrency: 1 });
    const body = await api.exportMessages({ startDate: '2026-01-01', endDate: '2026-01-01' });
    for await (const _ of body) break;
    // With concurrency 1 this second export could not start if the slot were still held.
    const again = await api.exportMessages({ startDate: '2026-01-01', endDate: '2026-01-01' });
    await again.cancel();
    expect(server.seen).toHaveLength(2);
  });

  it('when the caller aborts mid-body, then the iterator throws CANCELLED', async () => {
    server = await startScriptedServer((_req, res) => {
      res.writeHead(200);
      res.write(lines(10));
    });
    const { api } = client(server.url);
    const ctrl = new AbortController();
    const body = await api.exportMessages({
      startDate: '2026-01-01',
      endDate: '2026-01-01',
      signal: ctrl.signal,
    });
    const err = await (async () => {
      for await (const _ of body) ctrl.abort();
    })().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'CANCELLED' });
  });

  it('when the service answers 422, then HTTP_UNPROCESSABLE names exportMessages', async () => {
    server = await startScriptedServer((_req, res) =>
      sendJson(res, 422, {
        detail: [{ loc: ['query', 'start_date'], msg: 'invalid date', type: 'value_error' }],
      }),
    );
    const { api } = client(server.url);
    const err = await api.exportMessages({ startDate: '2026-01-01' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'HTTP_UNPROCESSABLE', retryable: false });
    expect((err as Error).message).toBe(
      'exportMessages failed: HTTP 422 Unprocessable Entity: query.start_date: invalid date',
    );
  });

  it('when dates are malformed or reversed, then USAGE and no request', async () => {
    server = await startScriptedServer((_req, res) => void res.end());
    const { api } = client(server.url);
    await expect(api.exportMessages({ startDate: '2026-02-30' })).rejects.toMatchObject({ code: 'USAGE' });
    await expect(
      api.exportMessages({ startDate: '2026-01-02', endDate: '2026-01-01' }),
    ).rejects.toMatchObject({
      code: 'USAGE',
    });
    expect(server.seen).toHaveLength(0);
  });
});
