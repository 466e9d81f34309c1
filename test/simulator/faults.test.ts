import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseFaultSpec, type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { type Checked, checkedClient, manualClock } from './support/client.ts';

/** Each fault switch, globally and per request (x-sim-faults), and their determinism per seed. */

const clock = manualClock('2026-06-15T10:00:00.000Z');
const slept: number[] = [];
let sim: Simulator;
let api: Checked;
const EXPORT = '/v2/analytics/messages';
const DAY = '2026-06-13';

beforeAll(async () => {
  sim = await startSimulator({
    seed: 9,
    days: 4,
    recordsPerDay: 400,
    now: clock.now,
    sleep: async (ms) => {
      slept.push(ms);
    },
  });
  api = await checkedClient(sim);
});
afterAll(async () => {
  await sim.close();
});

const withFaults = (spec: string, headers: Record<string, string>) => ({ ...headers, 'x-sim-faults': spec });

/** Reads a raw HTTP body until the server ends or cuts it; resolves with what arrived and how it ended. */
function rawGet(
  url: string,
  headers: Record<string, string>,
): Promise<{ bytes: Buffer; body: string; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => {
        chunks.push(c);
      });
      const done = () => {
        const bytes = Buffer.concat(chunks);
        resolve({ bytes, body: bytes.toString('utf8'), complete: res.complete });
      };
      res.on('end', done);
      res.on('error', done);
      res.on('aborted', done);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('faults', () => {
  it('when latency is asked for, then the simulator waits that long before answering', async () => {
    slept.length = 0;
    const r = await api.call('GET', '/v2/threads', '/v2/threads', {
      headers: withFaults('latency=250ms', api.v2()),
    });
    expect(r.status).toBe(200);
    expect(slept).toEqual([250]);
  });

  it('when 429 is switched on, then the answer is 429 with Retry-After', async () => {
    const r = await api.call('GET', '/v2/threads', '/v2/threads', {
      headers: withFaults('429=1:7s', api.v2()),
    });
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('7');
    api.validator.header('GET', '/v2/threads', 429, 'Retry-After', r.headers.get('retry-after'));
  });

  it('when a 5xx burst is switched on, then a URL fails the burst length and then answers normally', async () => {
    const url = `${EXPORT}?start_date=${DAY}&end_date=${DAY}`;
    const headers = withFaults('5xx=1:2', api.sa());
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await api.call('GET', EXPORT, url, { headers })).status);
    expect(statuses).toEqual([503, 500, 200]);
  });

  it('when cut is switched on, then the export stops mid-line and the connection closes without completing', async () => {
    const { bytes, complete } = await rawGet(
      `${sim.baseUrl}${EXPORT}?start_date=${DAY}&end_date=${DAY}`,
      withFaults('cut=1', api.sa()),
    );
    expect(complete).toBe(false);
    const end = bytes.lastIndexOf(10) + 1;
    const lines = bytes.subarray(0, end).toString('utf8').split('\n').slice(0, -1);
    const tail = bytes.subarray(end);
    const truth = sim.truth.exportDayLines(DAY);
    expect(lines).toEqual(truth.slice(0, lines.length));
    // The last line stops part-way, at a byte (possibly inside a multi-byte character).
    const next = Buffer.from(truth[lines.length]!, 'utf8');
    expect(tail.length).toBeGreaterThan(0);
    expect(tail.length).toBeLessThan(next.length);
    expect(next.subarray(0, tail.length).equals(tail)).toBe(true);
  });

  it('when cut is switched on for an event stream, then it drops after a few events, before completion', async () => {
    const created = await api.call('POST', '/v2/threads', '/v2/threads', {
      headers: { ...api.v2(), 'content-type': 'application/json' },
      body: JSON.stringify({ thread_name: 'cut stream' }),
    });
    const id = (created.body as { thread_id: string }).thread_id;
    await api.call('POST', '/v2/threads/{thread_id}/messages', `/v2/threads/${id}/messages`, {
      headers: api.v2(),
      body: new URLSearchParams({ message: 'stream me' }),
    });
    const { body, complete } = await rawGet(
      `${sim.baseUrl}/v2/threads/${id}/events`,
      withFaults('cut=1', api.v2()),
    );
    expect(complete).toBe(false);
    const events = body.split('\n\n').filter((b) => b.startsWith('event: '));
    expect(events.length).toBeGreaterThanOrEqual(1);
    expect(events.length).toBeLessThanOrEqual(3);
    expect(body).not.toContain('event: completion');
    // Without the fault, the same stream runs to completion.
    const full = await api.call('GET', '/v2/threads/{thread_id}/events', `/v2/threads/${id}/events`, {
      headers: api.v2(),
    });
    expect(full.text).toContain('event: completion');
  });

  it('when malformed lines are switched on, then broken lines are added and every true record still arrives in order', async () => {
    const r = await api
      .call('GET', EXPORT, `${EXPORT}?start_date=${DAY}`, {
        headers: withFaults('malformed=0.05', api.sa()),
        // The checked client would reject the broken lines; read this one raw.
      })
      .catch((e: Error) => e);
    expect(r).toBeInstanceOf(Error);
    const res = await fetch(`${sim.baseUrl}${EXPORT}?start_date=${DAY}`, {
      headers: withFaults('malformed=0.05', api.sa()),
    });
    const lines = (await res.text()).split('\n').filter((l) => l !== '');
    const truth = [DAY, '2026-06-14', '2026-06-15'].flatMap((d) => sim.truth.exportDayLines(d));
    const truthSet = new Set(truth);
    const extra = lines.filter((l) => !truthSet.has(l));
    expect(extra.length).toBeGreaterThan(5);
    expect(lines.filter((l) => truthSet.has(l))).toEqual(truth);
    const broken = extra.map((l) => {
      try {
        const rec = JSON.parse(l) as Record<string, unknown>;
        return 'User ID' in rec ? 'contract' : 'missing-field';
      } catch {
        return 'not-json';
      }
    });
    expect(new Set(broken).size).toBeGreaterThan(1);
  });

  it('when duplicates are switched on, then some lines arrive twice and nothing else changes', async () => {
    const res = await fetch(`${sim.baseUrl}${EXPORT}?start_date=${DAY}&end_date=${DAY}`, {
      headers: withFaults('duplicate=0.05', api.sa()),
    });
    const lines = (await res.text()).split('\n').filter((l) => l !== '');
    const truth = sim.truth.exportDayLines(DAY);
    expect(lines.length).toBeGreaterThan(truth.length);
    const deduped = lines.filter((l, i) => l !== lines[i - 1]);
    expect(deduped).toEqual(truth);
  });

  it('when expire is switched on, then a valid token is refused as expired', async () => {
    const r = await api.call('GET', '/v2/threads', '/v2/threads', {
      headers: withFaults('expire=1', api.v2()),
    });
    expect(r.status).toBe(401);
    expect(r.body).toEqual({ detail: 'Token expired' });
    const e = await api.call('GET', EXPORT, `${EXPORT}?start_date=${DAY}&end_date=${DAY}`, {
      headers: withFaults('expire=1', api.sa()),
    });
    expect(e.status).toBe(401);
  });

  it('when ttl is set, then exchanged tokens live that long', async () => {
    sim.setFaults('ttl=30s');
    try {
      const r = await api.call('POST', '/oauth/token', sim.tokenUrl, {
        body: new URLSearchParams({
          grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
          client_id: sim.credentials.clientId,
          client_secret: sim.credentials.clientSecret,
          subject_token: sim.credentials.serviceAccountToken,
          subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
        }),
      });
      const token = (r.body as { access_token: string; expires_in: number }).access_token;
      expect((r.body as { expires_in: number }).expires_in).toBe(30);
      clock.advance(31_000);
      const after = await api.call('GET', '/v2/threads', '/v2/threads', {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(after.status).toBe(401);
    } finally {
      clock.advance(-31_000);
      sim.setFaults('');
    }
  });

  it('when delete-before-history is switched on, then threads served by the export are gone when their history is read', async () => {
    const own = await startSimulator({
      seed: 9,
      days: 4,
      recordsPerDay: 400,
      now: clock.now,
      faults: 'delete-before-history=0.2',
    });
    const client = await checkedClient(own);
    try {
      const r = await client.call('GET', EXPORT, `${EXPORT}?start_date=${DAY}&end_date=${DAY}`, {
        headers: client.sa(),
      });
      const ids = new Set(
        r.text
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => (JSON.parse(l) as Record<string, string>)['Thread ID']!.toLowerCase()),
      );
      const deleted = [...ids].filter((id) => own.truth.isDeleted(id));
      expect(deleted.length).toBeGreaterThan(0);
      expect(deleted.length).toBeLessThan(ids.size);
      const h = await client.call(
        'GET',
        '/v2/threads/{thread_id}/messages',
        `/v2/threads/${deleted[0]}/messages`,
        { headers: client.v2() },
      );
      expect(h.status).toBe(404);
      // The ground truth follows: the day's export no longer holds them.
      expect(own.truth.exportDay(DAY).some((rec) => deleted.includes(rec['Thread ID'].toLowerCase()))).toBe(
        false,
      );
    } finally {
      await own.close();
    }
  });

  it('when faults are set globally with probabilities, then two simulators with the same seed meet the same faults', async () => {
    const run = async () => {
      const s = await startSimulator({
        seed: 21,
        days: 2,
        recordsPerDay: 20,
        now: clock.now,
        faults: '429=0.3,5xx=0.2:1',
      });
      try {
        const out: number[] = [];
        for (let i = 0; i < 30; i++) {
          const r = await fetch(
            `${s.baseUrl}/v2/threads/00000000-0000-4000-8000-00000000000${i % 10}/progress`,
            {
              headers: { authorization: `Bearer ${s.credentials.accessToken}` },
            },
          );
          await r.arrayBuffer();
          out.push(r.status);
        }
        return out;
      } finally {
        await s.close();
      }
    };
    const a = await run();
    expect(await run()).toEqual(a);
    expect(new Set(a)).toEqual(new Set([404, 429, 503]));
  });

  it('when a fault spec is parsed, then every switch is read and mistakes are refused', () => {
    expect(
      parseFaultSpec(
        'latency=25ms,429=0.1:2s,5xx=0.05:3,cut=0.02,malformed=0.01,duplicate=0.01,expire=0.5,ttl=1m,delete-before-history=0.05',
      ),
    ).toEqual({
      latencyMs: 25,
      throttle: { p: 0.1, retryAfterSec: 2 },
      serverError: { p: 0.05, burst: 3 },
      cut: 0.02,
      malformed: 0.01,
      duplicate: 0.01,
      expire: 0.5,
      ttlSec: 60,
      deleteBeforeHistory: 0.05,
    });
    expect(parseFaultSpec('none')).toEqual({});
    expect(parseFaultSpec('expire=30s')).toEqual({ ttlSec: 30 });
    for (const bad of ['cut=2', 'bogus=1', 'latency=fast', '5xx=0.1:0', 'cut'])
      expect(() => parseFaultSpec(bad)).toThrow();
  });

  it('when the fault header is malformed, then the request answers 400 and names the header', async () => {
    const r = await fetch(`${sim.baseUrl}/v2/threads`, { headers: withFaults('cut=yes', api.v2()) });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { detail: string }).detail).toMatch(/x-sim-faults/);
  });
});
