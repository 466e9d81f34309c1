import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as the scripted server saw it; `at` is performance.now() when its headers arrived. */
export interface Seen {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  body: string;
  at: number;
}

export type Handler = (req: Seen, res: ServerResponse, n: number) => void | Promise<void>;

export interface ScriptedServer {
  url: string;
  seen: Seen[];
  /** TCP connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

/**
 * A real node:http server whose answers the test scripts: the outbound service, faked at the
 * HTTP level (not a mock of any project module).
 */
export async function startScriptedServer(handler: Handler): Promise<ScriptedServer> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const at = performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const u = new URL(req.url ?? '/', 'http://x');
      const s: Seen = {
        method: req.method ?? 'GET',
        path: u.pathname,
        query: u.searchParams,
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at,
      };
      seen.push(s);
      Promise.resolve(handler(s, res, seen.length)).catch((err: unknown) => {
        res.destroy(err instanceof Error ? err : new Error(String(err)));
      });
    });
  });
  let connections = 0;
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    get connections() {
      return connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** Highest number of timestamps (ms) that fall in any half-open window [t, t + windowMs). */
export function maxInAnyWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  let j = 0;
  for (let i = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= windowMs) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}
