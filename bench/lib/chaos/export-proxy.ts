import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A proxy in front of the simulator's base URL for the chaos run's own steps (late-id.ts,
 * held-seen.ts): every request passes through, and the body of a 200 answer of the export
 * (`/v2/analytics/messages`) is rewritten by the step's function when it set one. The answer
 * keeps the simulator's status and headers, with a Content-Length of the rewritten body, so a
 * rewritten export is as "known complete" as the rewrite leaves it (decision 0008).
 */
export interface ExportProxy {
  /** The CRS_BASE_URL a worker reading through the proxy uses. */
  baseUrl: string;
  /** Rewrites the exports that pass from now on (null: unchanged). */
  rewrite(fn: ((body: string) => string) | null): void;
  close(): Promise<void>;
}

export async function startExportProxy(simBaseUrl: string): Promise<ExportProxy> {
  let edit: ((body: string) => string) | null = null;
  const server: Server = createServer((req, res) => {
    forward(req, res, simBaseUrl, edit).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    rewrite: (fn) => {
      edit = fn;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function forward(
  req: IncomingMessage,
  res: ServerResponse,
  base: string,
  edit: ((body: string) => string) | null,
): Promise<void> {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (typeof v === 'string' && k !== 'host' && k !== 'content-length') headers[k] = v;
  }
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const up = await fetch(new URL(req.url ?? '/', base), {
    method: req.method ?? 'GET',
    headers: { ...headers, 'accept-encoding': 'identity' },
    ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
  });
  let body = Buffer.from(await up.arrayBuffer());
  if (edit !== null && up.status === 200 && (req.url ?? '').startsWith('/v2/analytics/messages')) {
    body = Buffer.from(edit(body.toString('utf8')));
  }
  const out: Record<string, string> = {};
  up.headers.forEach((v, k) => {
    if (k !== 'content-length' && k !== 'transfer-encoding' && k !== 'content-encoding') out[k] = v;
  });
  res.writeHead(up.status, { ...out, 'content-length': body.length });
  res.end(body);
}

/** The line's `Message ID` as JSON.parse reads it, lower-case; undefined for a line that is not a record. */
export function parsedId(line: string): string | undefined {
  try {
    const v = (JSON.parse(line) as Record<string, unknown>)['Message ID'];
    return typeof v === 'string' ? v.toLowerCase() : undefined;
  } catch {
    return undefined;
  }
}
