import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';

/**
 * The faults of a hostile world: clean-but-truncated exports, stalls, poison lines and entries
 * (listed by the ground truth), token expiry that spares a token's first use, and switching
 * faults from another process through /_sim/faults.
 */
const now = new Date('2026-06-15T10:00:00.000Z');
const DAY = '2026-06-13';
let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({ seed: 21, days: 4, recordsPerDay: 200, now: () => now, admin: true });
});
afterAll(async () => {
  await sim.close();
});

function get(
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; type: string; body: string; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(`${sim.baseUrl}${path}`, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      const done = () =>
        resolve({
          status: res.statusCode ?? 0,
          type: String(res.headers['content-type'] ?? ''),
          body: Buffer.concat(chunks).toString('utf8'),
          complete: res.complete,
        });
      res.on('end', done);
      res.on('aborted', done);
      res.on('error', done);
    });
    req.on('error', reject);
    req.end();
  });
}

const exportOf = (faults: string, n: number) =>
  get(`/v2/analytics/messages?start_date=${DAY}&end_date=${DAY}&n=${n}`, {
    authorization: `Bearer ${sim.credentials.serviceAccountToken}`,
    'x-sim-faults': faults,
  });

describe('hostile-world faults', () => {
  it('when truncate is on, then each response ends cleanly early in one of its five forms, never past 80% of the day', async () => {
    const full = sim.truth.exportDayLines(DAY);
    const forms = new Set<string>();
    for (let n = 0; n < 40 && forms.size < 5; n++) {
      const r = await exportOf('truncate=1', n);
      expect(r.status).toBe(200);
      expect(r.complete).toBe(true);
      if (r.type.startsWith('text/html')) forms.add('html');
      else if (r.type.startsWith('application/json')) {
        expect(JSON.parse(r.body)).toEqual({ detail: expect.any(String) });
        forms.add('json-error');
      } else if (r.body === '') forms.add('empty');
      else {
        const lines = r.body.split('\n');
        const last = lines.pop();
        forms.add(last === '' ? 'lines' : 'no-final-newline');
        if (last !== '') lines.push(last!);
        expect(lines.length).toBeLessThanOrEqual(Math.ceil(full.length * 0.8));
        expect(lines).toEqual(full.slice(0, lines.length));
      }
    }
    expect([...forms].sort()).toEqual(['empty', 'html', 'json-error', 'lines', 'no-final-newline']);
  });

  it('when stall is on, then the body stops for the stall and the connection then drops unfinished', async () => {
    const r = await exportOf('stall=1:300ms', 100);
    expect(r.status).toBe(200);
    expect(r.complete).toBe(false);
    expect(r.body.length).toBeLessThan(sim.truth.exportDayLines(DAY).join('\n').length);
  });

  it('when respell is on, then some lines are written otherwise, each read by JSON.parse as the same record, the same bytes on every read', async () => {
    const full = sim.truth.exportDayLines(DAY);
    const a = (await exportOf('respell=0.3', 102)).body.split('\n').slice(0, -1);
    const b = (await exportOf('respell=0.3', 103)).body.split('\n').slice(0, -1);
    expect(a).toEqual(b);
    expect(a.length).toBe(full.length);
    const changed = a.filter((l, i) => l !== full[i]);
    expect(changed.length).toBeGreaterThan(full.length / 10);
    expect(changed.length).toBeLessThan(full.length / 2);
    expect(a.map((l) => JSON.parse(l))).toEqual(full.map((l) => JSON.parse(l)));
    // Each spelling: a decoy id first, an escaped key, an escaped id, tabs.
    expect(changed.some((l) => l.includes('"Message\\u0020ID"'))).toBe(true);
    expect(changed.some((l) => l.includes('"\\u004dessage ID"'))).toBe(true);
    expect(changed.some((l) => /"Message ID":"\\u00[0-9a-f]{2}/.test(l))).toBe(true);
    expect(changed.some((l) => l.includes('"Message ID"\t:\t'))).toBe(true);
  });

  it('when poison is on, then the export carries exactly the poison lines the ground truth lists, before good lines', async () => {
    sim.setFaults('poison=0.15');
    try {
      const poison = sim.truth.poisonLines(DAY);
      expect(poison.length).toBeGreaterThan(3);
      const r = await exportOf('none', 101);
      const lines = r.body.split('\n').slice(0, -1);
      const good = new Set(sim.truth.exportDayLines(DAY));
      expect(lines.filter((l) => !good.has(l))).toEqual(poison);
      expect(lines.filter((l) => good.has(l))).toEqual(sim.truth.exportDayLines(DAY));
      // Each kind: an impossible date, 10,000 levels, a number beyond any double, whitespace.
      const kinds = new Set(
        poison.map((l) =>
          l.trim() === ''
            ? 'blank'
            : l.includes('-02-30T')
              ? 'date'
              : l.includes('1e200000')
                ? 'number'
                : l.includes('['.repeat(10_000))
                  ? 'deep'
                  : 'other',
        ),
      );
      expect([...kinds].sort()).toEqual(['blank', 'date', 'deep', 'number']);
      // The same lines on another read of the day: they are data, not noise of one request.
      expect((await exportOf('none', 102)).body).toBe(r.body);
    } finally {
      sim.setFaults('none');
    }
  });

  it('when poison-history is on, then the entries and artifacts the ground truth lists carry an unstorable value', async () => {
    sim.setFaults('poison-history=0.3');
    try {
      const thread = sim.truth
        .threads()
        .find(
          (t) => !sim.truth.isRestricted(t.thread_id) && sim.truth.poisonEntries(t.thread_id).length > 0,
        )!;
      const r = await get(`/v2/threads/${thread.thread_id}/messages?limit_num=100`, {
        authorization: `Bearer ${sim.credentials.accessToken}`,
      });
      expect(r.status).toBe(200);
      const poisoned = JSON.parse(r.body).messages.filter((e: Record<string, unknown>) => 'x_trace' in e);
      expect(poisoned.map((e: { message_id: string }) => e.message_id)).toEqual(
        sim.truth.poisonEntries(thread.thread_id),
      );
      expect(r.body.includes('1e200000') || r.body.includes('['.repeat(10_000))).toBe(true);
      const withArtifact = sim.truth
        .threads()
        .find(
          (t) => !sim.truth.isRestricted(t.thread_id) && sim.truth.poisonArtifacts(t.thread_id).length > 0,
        )!;
      const artifactId = sim.truth.poisonArtifacts(withArtifact.thread_id)[0]!;
      const a = await get(`/v2/threads/${withArtifact.thread_id}/artifacts/${artifactId}`, {
        authorization: `Bearer ${sim.credentials.accessToken}`,
      });
      expect(a.body).toMatch(/"x_trace":(1e200000|\[{10000})/);
    } finally {
      sim.setFaults('none');
    }
  });

  it('when token-expiry is on, then a token is refused as expired on later calls but never on its first', async () => {
    const form = new URLSearchParams({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      client_id: sim.credentials.clientId,
      client_secret: sim.credentials.clientSecret,
      subject_token: sim.credentials.serviceAccountToken,
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
    });
    const token = (
      (await (await fetch(sim.tokenUrl, { method: 'POST', body: form })).json()) as {
        access_token: string;
      }
    ).access_token;
    const call = (n: number) =>
      get(`/v2/threads?n=${n}`, { authorization: `Bearer ${token}`, 'x-sim-faults': 'token-expiry=1' });
    expect((await call(1)).status).toBe(200);
    const second = await call(2);
    expect(second.status).toBe(401);
    expect(JSON.parse(second.body)).toEqual({ detail: 'Token expired' });
  });

  it('when another process PUTs a spec to /_sim/faults, then it is in force and /_sim/counts counts what struck', async () => {
    const put = await fetch(`${sim.baseUrl}/_sim/faults`, { method: 'PUT', body: '5xx=1:1' });
    expect(put.status).toBe(200);
    expect(sim.faults()).toEqual({ serverError: { p: 1, burst: 1 } });
    const r = await get('/v2/threads?n=admin', { authorization: `Bearer ${sim.credentials.accessToken}` });
    expect(r.status).toBeGreaterThanOrEqual(500);
    const counts = (await (await fetch(`${sim.baseUrl}/_sim/counts`)).json()) as {
      counts: Record<string, number>;
    };
    expect(counts.counts['5xx']).toBeGreaterThan(0);
    const bad = await fetch(`${sim.baseUrl}/_sim/faults`, { method: 'PUT', body: 'bogus=1' });
    expect(bad.status).toBe(400);
    await fetch(`${sim.baseUrl}/_sim/faults`, { method: 'PUT', body: 'none' });
    expect(sim.faults()).toEqual({});
  });
});
