import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { type Checked, checkedClient, manualClock } from './support/client.ts';

/** The three auth schemes of spec §5 and the token exchange, with their failures on each surface. */

const clock = manualClock('2026-05-01T08:00:00.000Z');
let sim: Simulator;
let api: Checked;

beforeAll(async () => {
  sim = await startSimulator({ seed: 3, days: 2, recordsPerDay: 50, now: clock.now });
  api = await checkedClient(sim);
});
afterAll(async () => {
  await sim.close();
});

const EXCHANGE = {
  grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
  subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
};

async function exchange(fields: Record<string, string>) {
  return api.call('POST', '/oauth/token', sim.tokenUrl, { body: new URLSearchParams(fields) });
}

function goodExchange(): Record<string, string> {
  return {
    ...EXCHANGE,
    client_id: sim.credentials.clientId,
    client_secret: sim.credentials.clientSecret,
    subject_token: sim.credentials.serviceAccountToken,
  };
}

/** Flips one character of the signature. */
function tamper(token: string): string {
  const last = token.at(-2) === 'A' ? 'B' : 'A';
  return `${token.slice(0, -2)}${last}${token.at(-1)}`;
}

const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

describe('auth', () => {
  it('when the service-account JWT is exchanged (RFC 8693), then the access token opens the v2 API until it expires', async () => {
    const r = await exchange(goodExchange());
    expect(r.status).toBe(200);
    const body = r.body as { access_token: string; token_type: string; expires_in: number };
    expect(body.token_type).toBe('Bearer');
    expect(body.expires_in).toBe(3600);
    const ok = await api.call('GET', '/v2/threads', '/v2/threads', { headers: bearer(body.access_token) });
    expect(ok.status).toBe(200);
    clock.advance(3601_000);
    try {
      const expired = await api.call('GET', '/v2/threads', '/v2/threads', {
        headers: bearer(body.access_token),
      });
      expect(expired.status).toBe(401);
      expect(expired.body).toEqual({ detail: 'Token expired' });
      expect(expired.headers.get('www-authenticate')).toMatch(/invalid_token/);
    } finally {
      clock.advance(-3601_000);
    }
  });

  it('when client basic auth is used instead of form fields, then the exchange succeeds too', async () => {
    const { client_id, client_secret, ...rest } = goodExchange();
    const basic = Buffer.from(`${client_id}:${client_secret}`).toString('base64');
    const r = await api.call('POST', '/oauth/token', sim.tokenUrl, {
      headers: { authorization: `Basic ${basic}` },
      body: new URLSearchParams(rest),
    });
    expect(r.status).toBe(200);
  });

  it('when the exchange request is wrong, then it answers the RFC 6749 error for it', async () => {
    const good = goodExchange();
    const cases: Array<[Record<string, string>, number, string]> = [
      [{ ...good, grant_type: 'client_credentials' }, 400, 'unsupported_grant_type'],
      [{ ...good, client_secret: 'wrong' }, 401, 'invalid_client'],
      [{ ...good, client_id: 'someone' }, 401, 'invalid_client'],
      [{ ...good, subject_token: tamper(good.subject_token!) }, 400, 'invalid_grant'],
      [{ ...good, subject_token: sim.credentials.accessToken }, 400, 'invalid_grant'],
      [{ ...good, subject_token_type: 'urn:ietf:params:oauth:token-type:saml2' }, 400, 'invalid_request'],
    ];
    for (const [fields, status, error] of cases) {
      const r = await exchange(fields);
      expect(r.status, error).toBe(status);
      expect((r.body as { error: string }).error).toBe(error);
    }
    const { subject_token: _omit, ...missing } = good;
    const r = await exchange(missing);
    expect((r.body as { error: string }).error).toBe('invalid_request');
    const asJson = await api.call('POST', '/oauth/token', sim.tokenUrl, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(good),
    });
    expect(asJson.status).toBe(400);
  });

  it('when the v2 API is called without, with a tampered, or with a service-account token, then it answers 401', async () => {
    for (const headers of [
      {},
      bearer(tamper(sim.credentials.accessToken)),
      bearer(sim.credentials.serviceAccountToken),
      bearer('not.a.jwt'),
    ]) {
      const r = await api.call('GET', '/v2/threads', '/v2/threads', { headers });
      expect(r.status, JSON.stringify(headers)).toBe(401);
      const c = await api.call('POST', '/v2/threads', '/v2/threads', {
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ thread_name: 'x' }),
      });
      expect(c.status).toBe(401);
    }
  });

  it('when the export is called without, with a tampered, with an access, or with an expired service-account token, then it answers 401', async () => {
    const q = '/v2/analytics/messages?start_date=2026-04-30&end_date=2026-04-30';
    for (const headers of [
      {},
      bearer(tamper(sim.credentials.serviceAccountToken)),
      bearer(sim.credentials.accessToken),
    ]) {
      const r = await api.call('GET', '/v2/analytics/messages', q, { headers });
      expect(r.status).toBe(401);
    }
    const ok = await api.call('GET', '/v2/analytics/messages', q, { headers: api.sa() });
    expect(ok.status).toBe(200);
    clock.advance(366 * 86_400_000);
    try {
      const expired = await api.call('GET', '/v2/analytics/messages', q, { headers: api.sa() });
      expect(expired.status).toBe(401);
      expect(expired.body).toEqual({ detail: 'Token expired' });
    } finally {
      clock.advance(-366 * 86_400_000);
    }
  });

  it('when the legacy API is called without or with a wrong x-api-key, or with a bearer token, then it answers 401', async () => {
    const path = `${sim.legacyBaseUrl}/client/agent/dynamic-output/6f1c2f0e-2a51-4a43-9b1e-0d6f5a0c9e11`;
    for (const headers of [{}, { 'x-api-key': 'sim-key-wrong' }, bearer(sim.credentials.accessToken)]) {
      const r = await api.call('GET', '/client/agent/dynamic-output/{agent_id}', path, { headers });
      expect(r.status).toBe(401);
    }
    const art = await api.call(
      'GET',
      '/client/v2/thread/{thread_id}/artifact/{artifact_id}',
      `${sim.legacyBaseUrl}/client/v2/thread/00000000-0000-4000-8000-000000000000/artifact/art_1`,
      {},
    );
    expect(art.status).toBe(401);
    const ok = await api.call('GET', '/client/agent/dynamic-output/{agent_id}', path, {
      headers: api.legacy(),
    });
    expect(ok.status).toBe(200);
  });

  it('when the same seed starts again, then the same credentials are accepted', async () => {
    const again = await startSimulator({ seed: 3, days: 2, recordsPerDay: 50, now: clock.now });
    try {
      expect(again.credentials.apiKey).toBe(sim.credentials.apiKey);
      expect(again.credentials.clientSecret).toBe(sim.credentials.clientSecret);
      const r = await fetch(`${again.baseUrl}/v2/threads`, { headers: bearer(sim.credentials.accessToken) });
      expect(r.status).toBe(200);
      await r.arrayBuffer();
    } finally {
      await again.close();
    }
  });
});
