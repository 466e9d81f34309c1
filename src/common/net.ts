import { createServer } from 'node:net';

/**
 * A TCP port on 127.0.0.1 that was free a moment ago (the system picks it; the socket is closed
 * again before this returns), for a server started next: the embedded PostgreSQL, a dev
 * Temporal server. Another process may take it in between; the callers' servers then fail to
 * start with an error that names the port. Not for workflow code (node:net).
 */
export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}
