import { Writable } from 'node:stream';
import {
  createServiceClient,
  type ServiceClient,
  type ServiceClientOptions,
} from '../../../src/api/index.ts';
import { createLogger, type Logger } from '../../../src/log.ts';
import type { Simulator } from '../../../src/simulator/index.ts';

export const SECRETS = {
  serviceAccountToken: 'eyJhbGciOiJIUzI1NiJ9.dGVzdC1zZXJ2aWNlLWFjY291bnQ.test-signature-0001',
  accessToken: 'static-access-token-XYZ987',
  clientSecret: 'client-secret-QWERTY-555',
  apiKey: 'legacy-api-key-ABC123',
};

/** A logger whose JSON lines are kept in memory, so tests can read what was logged. */
export function captureLog(): { log: Logger; text: () => string } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString('utf8'));
      cb();
    },
  });
  return { log: createLogger({ level: 'debug', pretty: false, destination }), text: () => lines.join('') };
}

export function options(baseUrl: string, over: Partial<ServiceClientOptions> = {}): ServiceClientOptions {
  return {
    baseUrl,
    legacyBaseUrl: undefined,
    serviceAccountToken: SECRETS.serviceAccountToken,
    accessToken: SECRETS.accessToken,
    tokenUrl: undefined,
    clientId: undefined,
    clientSecret: undefined,
    apiKey: undefined,
    timeoutMs: 5_000,
    rateLimitRps: 1000,
    concurrency: 8,
    maxRetries: 3,
    baseBackoffMs: 5,
    maxBackoffMs: 20,
    ...over,
  };
}

export function client(
  baseUrl: string,
  over: Partial<ServiceClientOptions> = {},
): {
  api: ServiceClient;
  logText: () => string;
} {
  const { log, text } = captureLog();
  return { api: createServiceClient(options(baseUrl, over), log), logText: text };
}

/**
 * Options for a client of the simulator as a deployment would configure it: v2 tokens by token
 * exchange, the legacy path with an API key, and retries short enough for a test with faults on.
 */
export function simulatorOptions(
  sim: Simulator,
  over: Partial<ServiceClientOptions> = {},
): ServiceClientOptions {
  return {
    baseUrl: sim.baseUrl,
    legacyBaseUrl: sim.legacyBaseUrl,
    serviceAccountToken: sim.credentials.serviceAccountToken,
    accessToken: undefined,
    tokenUrl: sim.tokenUrl,
    clientId: sim.credentials.clientId,
    clientSecret: sim.credentials.clientSecret,
    apiKey: sim.credentials.apiKey,
    timeoutMs: 10_000,
    rateLimitRps: 500,
    concurrency: 8,
    maxRetries: 6,
    baseBackoffMs: 20,
    maxBackoffMs: 200,
    ...over,
  };
}
