import { inspect } from 'node:util';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient, type HttpRequest } from '../../src/api/index.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { captureLog, simulatorOptions } from './helpers/client-setup.ts';

/**
 * The client's objects keep their state in #private fields (docs/decisions/0019): a client or an
 * export body put in a log line, printed, or serialized shows no credential, neither a configured
 * one nor an access token obtained by exchange. TypeScript's `private` would show them all.
 */
let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({ seed: 19, days: 1, recordsPerDay: 20, now: runningClock(PINNED) });
});
afterAll(async () => {
  await sim?.close();
});

describe('what a client shows of itself', () => {
  it('when a client and an export body are inspected, serialized and logged after a token exchange, then no credential appears', async () => {
    // Every credential sent, as the server received it: the exchanged access token included.
    const sent = new Set<string>();
    const observed: HttpRequest = (url, opts) => {
      const auth = opts.headers.authorization ?? opts.headers['x-api-key'];
      if (auth !== undefined) sent.add(auth.replace(/^Bearer /, ''));
      return request(url, opts);
    };
    const { log, text } = captureLog();
    const api = createServiceClient(simulatorOptions(sim, { request: observed }), log);
    expect((await api.listThreads()).length).toBeGreaterThan(0);
    const body = await api.exportMessages({});
    const secrets = [
      sim.credentials.serviceAccountToken,
      sim.credentials.clientSecret,
      sim.credentials.apiKey,
      ...sent,
    ];
    // The access token came from the exchange: it is none of the configured credentials.
    expect(sent.size).toBe(2);
    try {
      for (const shown of [
        inspect(api, { showHidden: true, depth: Number.POSITIVE_INFINITY, getters: true }),
        inspect(body, { showHidden: true, depth: Number.POSITIVE_INFINITY, getters: true }),
        JSON.stringify(api),
        JSON.stringify(body),
      ]) {
        for (const secret of secrets) expect(shown).not.toContain(secret);
      }
      log.info({ client: api, body }, 'the client and an export body');
      expect(text()).toContain('the client and an export body');
      for (const secret of secrets) expect(text()).not.toContain(secret);
    } finally {
      await body.cancel();
    }
  });
});
