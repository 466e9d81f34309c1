import { once } from 'node:events';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/common/net.ts';

describe('freePort', () => {
  it('when a free port is asked for, then a server can listen on it at 127.0.0.1', async () => {
    const port = await freePort();
    expect(port).toBeGreaterThan(0);
    const srv = createServer();
    srv.listen(port, '127.0.0.1');
    await once(srv, 'listening');
    expect((srv.address() as { port: number }).port).toBe(port);
    srv.close();
    await once(srv, 'close');
  });
});
