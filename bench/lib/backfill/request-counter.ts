import { once } from 'node:events';
import { Agent, createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A counting front door for the simulator: every request to the service passes through it, and
 * its arrival time is recorded before it is forwarded. What it counts is what the service sees
 * arrive, from every worker process together, on one clock (this process's), so a limit that holds
 * per process but not across processes shows here. Bodies stream through untouched.
 */
export interface RequestCounter {
  /** Base URL of the front door (the simulator's base URL with this port). */
  baseUrl: string;
  /** Rewrites the simulator's CRS_* variables to point at the front door. */
  env(simEnv: Record<string, string>, simBaseUrl: string): Record<string, string>;
  /** Arrival times (ms since the epoch) of every request so far. */
  arrivals(): readonly number[];
  /** Every request so far: arrival time and path (without the query). */
  requests(): readonly { at: number; path: string }[];
  close(): Promise<void>;
}

export async function startRequestCounter(target: string): Promise<RequestCounter> {
  const to = new URL(target);
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const times: number[] = [];
  const paths: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    times.push(Date.now());
    paths.push((req.url ?? '').split('?')[0] ?? '');
    const up = request(
      {
        host: to.hostname,
        port: to.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: to.host },
        agent,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        answer.on('error', () => res.destroy());
      },
    );
    up.on('error', () => res.destroy());
    req.on('error', () => up.destroy());
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    baseUrl,
    env: (simEnv, simBaseUrl) =>
      Object.fromEntries(Object.entries(simEnv).map(([k, v]) => [k, v.split(simBaseUrl).join(baseUrl)])),
    arrivals: () => times,
    requests: () => times.map((at, i) => ({ at, path: paths[i] ?? '' })),
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      agent.destroy();
      await closed;
    },
  };
}

export interface RateFigures {
  requests: number;
  /** Most arrivals in one calendar second of the counting clock. */
  maxPerSecond: number;
  /** Most arrivals in any window of 1000 ms (sliding: starts at every arrival). */
  maxSliding: number;
  /** Arrivals per calendar second, oldest first, from the first to the last busy second. */
  perSecond: number[];
}

export function rateFigures(arrivals: readonly number[]): RateFigures {
  const t = [...arrivals].sort((a, b) => a - b);
  let maxSliding = 0;
  for (let i = 0, j = 0; i < t.length; i++) {
    while ((t[i] ?? 0) - (t[j] ?? 0) >= 1000) j++;
    maxSliding = Math.max(maxSliding, i - j + 1);
  }
  const perSecond: number[] = [];
  const first = t.length ? Math.floor((t[0] ?? 0) / 1000) : 0;
  for (const x of t) {
    const s = Math.floor(x / 1000) - first;
    while (perSecond.length <= s) perSecond.push(0);
    perSecond[s] = (perSecond[s] ?? 0) + 1;
  }
  return { requests: t.length, maxPerSecond: Math.max(0, ...perSecond), maxSliding, perSecond };
}
