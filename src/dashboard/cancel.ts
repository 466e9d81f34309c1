/**
 * Stops the statement a pooled connection is running, for a request whose browser went away: a
 * PostgreSQL CancelRequest (protocol 3.0), sent on a connection of its own. It needs no free
 * connection of the pool and no login (the backend's id and secret key are the proof), so it
 * works even when every connection is busy, which is when it matters most.
 */
import net from 'node:net';
import type pg from 'pg';

const CANCEL_REQUEST_CODE = 80877102;

interface Backend {
  host?: string;
  port?: number;
  processID?: number;
  secretKey?: number;
}

/** Sends the cancel and resolves once the server has closed that connection (or it failed). */
export function cancelRunning(client: pg.PoolClient): Promise<void> {
  const b = client as unknown as Backend;
  if (b.processID === undefined || b.secretKey === undefined) return Promise.resolve();
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  packet.writeInt32BE(b.processID, 8);
  packet.writeInt32BE(b.secretKey, 12);
  const port = b.port ?? 5432;
  const host = b.host ?? 'localhost';
  return new Promise((resolve) => {
    const socket = host.startsWith('/')
      ? net.connect(`${host}/.s.PGSQL.${port}`)
      : net.connect({ host, port });
    socket.setTimeout(5_000, () => socket.destroy());
    socket.once('connect', () => socket.end(packet));
    socket.once('error', () => resolve());
    socket.once('close', () => resolve());
  });
}
