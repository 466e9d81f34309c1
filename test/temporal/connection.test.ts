import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { CrsError } from '../../src/errors.ts';
import { connectionSettings } from '../../src/temporal/connection.ts';

describe('Temporal connection settings', () => {
  it('when only an address is set, then the connection is plain (a local dev server)', () => {
    const s = connectionSettings(parseConfig({ TEMPORAL_ADDRESS: 'localhost:7233' }).temporal);
    expect(s).toEqual({ address: 'localhost:7233' });
  });

  it('when an API key is set, then it is sent over TLS (Temporal Cloud)', () => {
    const s = connectionSettings(
      parseConfig({ TEMPORAL_ADDRESS: 'ns.acct.tmprl.cloud:7233', TEMPORAL_API_KEY: 'k-123' }).temporal,
    );
    expect(s).toEqual({ address: 'ns.acct.tmprl.cloud:7233', tls: true, apiKey: 'k-123' });
  });

  it('when client certificate, key and CA paths are set, then the connection uses mTLS with them', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'crs-tls-'));
    for (const f of ['c.pem', 'k.pem', 'ca.pem']) writeFileSync(path.join(dir, f), `-----${f}-----`);
    const s = connectionSettings(
      parseConfig({
        TEMPORAL_TLS_CERT_PATH: path.join(dir, 'c.pem'),
        TEMPORAL_TLS_KEY_PATH: path.join(dir, 'k.pem'),
        TEMPORAL_TLS_CA_PATH: path.join(dir, 'ca.pem'),
        TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
      }).temporal,
    );
    const tls = s.tls as {
      clientCertPair: { crt: Uint8Array; key: Uint8Array };
      serverRootCACertificate: Uint8Array;
    };
    expect(Buffer.from(tls.clientCertPair.crt).toString()).toBe('-----c.pem-----');
    expect(Buffer.from(tls.clientCertPair.key).toString()).toBe('-----k.pem-----');
    expect(Buffer.from(tls.serverRootCACertificate).toString()).toBe('-----ca.pem-----');
    expect(s.tls).toMatchObject({ serverNameOverride: 'temporal.internal' });
  });

  it('when a certificate is given without its key, then configuration fails naming both variables', () => {
    const err = (() => {
      try {
        connectionSettings(parseConfig({ TEMPORAL_TLS_CERT_PATH: '/x/c.pem' }).temporal);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(CrsError);
    expect((err as CrsError).code).toBe('CONFIG_INVALID');
    expect((err as CrsError).message).toContain('TEMPORAL_TLS_KEY_PATH');
  });
});
