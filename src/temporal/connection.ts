import { readFileSync } from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import type { TLSConfig } from '@temporalio/common/lib/internal-non-workflow/index.js';
import { NativeConnection } from '@temporalio/worker';
import type { Config } from '../config.ts';
import { CrsError, errorMessage } from '../errors.ts';
import { redactText } from '../log.ts';

type TemporalSettings = Config['temporal'];

export interface ConnectionSettings {
  address: string;
  tls?: TLSConfig | boolean;
  apiKey?: string;
}

function readPem(variable: string, file: string): Uint8Array {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new CrsError(
      'CONFIG_INVALID',
      `${variable}: cannot read ${file} (${(err as NodeJS.ErrnoException).code})`,
    );
  }
}

/**
 * Connection options for the three kinds of server: a local dev server (plain gRPC), a
 * self-hosted cluster (TLS, optionally with a private CA and mTLS client certificates), and
 * Temporal Cloud (mTLS, or an API key over TLS). The key and certificates stay in this process.
 */
export function connectionSettings(t: TemporalSettings): ConnectionSettings {
  const problems: string[] = [];
  if (Boolean(t.tlsCertPath) !== Boolean(t.tlsKeyPath)) {
    problems.push('TEMPORAL_TLS_CERT_PATH and TEMPORAL_TLS_KEY_PATH: set both for mTLS, or neither');
  }
  if (problems.length) {
    throw new CrsError('CONFIG_INVALID', `invalid configuration:\n  - ${problems.join('\n  - ')}`, {
      details: { problems },
    });
  }
  const tls: TLSConfig = {};
  if (t.tlsCertPath && t.tlsKeyPath) {
    tls.clientCertPair = {
      crt: readPem('TEMPORAL_TLS_CERT_PATH', t.tlsCertPath),
      key: readPem('TEMPORAL_TLS_KEY_PATH', t.tlsKeyPath),
    };
  }
  if (t.tlsCaPath) tls.serverRootCACertificate = readPem('TEMPORAL_TLS_CA_PATH', t.tlsCaPath);
  if (t.tlsServerName) tls.serverNameOverride = t.tlsServerName;
  const wantsTls = Object.keys(tls).length > 0 || t.apiKey !== undefined;
  return {
    address: t.address,
    ...(wantsTls ? { tls: Object.keys(tls).length > 0 ? tls : true } : {}),
    ...(t.apiKey ? { apiKey: t.apiKey } : {}),
  };
}

function unavailable(t: TemporalSettings, err: unknown): CrsError {
  return new CrsError(
    'TEMPORAL_UNAVAILABLE',
    `cannot reach Temporal at ${t.address} (namespace ${t.namespace}): ${redactText(errorMessage(err))}`,
    { retryable: true, cause: err },
  );
}

export interface TemporalClient {
  client: Client;
  connection: Connection;
  close(): Promise<void>;
}

export async function connectClient(t: TemporalSettings): Promise<TemporalClient> {
  const settings = connectionSettings(t);
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...settings, connectTimeout: '10s' });
  } catch (err) {
    throw unavailable(t, err);
  }
  const client = new Client({ connection, namespace: t.namespace });
  return { client, connection, close: () => connection.close() };
}

export async function connectWorker(t: TemporalSettings): Promise<NativeConnection> {
  const settings = connectionSettings(t);
  try {
    return await NativeConnection.connect(settings);
  } catch (err) {
    throw unavailable(t, err);
  }
}
