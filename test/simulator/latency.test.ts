import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { type Checked, checkedClient, manualClock } from './support/client.ts';

// The latency fault measures from the request's arrival: the answer is computed while the latency
// runs and is written when it has passed, so the simulator's own work does not add to it.

const clock = manualClock('2026-06-15T10:00:00.000Z');
const gates: { ms: number; open: () => void }[] = [];
let sim: Simulator;
let api: Checked;

beforeAll(async () => {
  sim = await startSimulator({
    seed: 4,
    days: 2,
    recordsPerDay: 50,
    now: clock.now,
    // Each latency is a gate the test opens itself.
    sleep: (ms) => new Promise<void>((open) => gates.push({ ms, open })),
  });
  api = await checkedClient(sim);
});
afterAll(async () => {
  await sim.close();
});

async function gateOpened(): Promise<{ ms: number; open: () => void }> {
  for (let i = 0; i < 2000 && gates.length === 0; i++) await sleep(5);
  const g = gates.shift();
  if (!g) throw new Error('the simulator never started its latency');
  return g;
}

describe('latency fault', () => {
  it('when a JSON answer has latency, then it is computed at arrival and written only once the latency has passed', async () => {
    let answered = false;
    const reply = api
      .call(
        'GET',
        '/v2/threads/{thread_id}/messages',
        `/v2/threads/${sim.truth.threads()[0]!.thread_id}/messages`,
        {
          headers: { ...api.v2(), 'x-sim-faults': 'latency=40ms' },
        },
      )
      .then((r) => {
        answered = true;
        return r;
      });
    const gate = await gateOpened();
    expect(gate.ms).toBe(40);
    // Held: give it every chance to slip out.
    await sleep(100);
    expect(answered).toBe(false);
    // The token (30 days) expires during the latency: an answer computed only after it would be a
    // 401; this one was computed at arrival.
    clock.advance(31 * 86_400_000);
    try {
      gate.open();
      const r = await reply;
      expect(r.status).toBe(200);
    } finally {
      clock.advance(-31 * 86_400_000);
    }
  });

  it('when an error answer has latency, then it is held the same way', async () => {
    let answered = false;
    const reply = api
      .call('GET', '/v2/threads/{thread_id}/messages', '/v2/threads/not-a-uuid/messages', {
        headers: { ...api.v2(), 'x-sim-faults': 'latency=30ms' },
      })
      .then((r) => {
        answered = true;
        return r;
      });
    const gate = await gateOpened();
    await sleep(100);
    expect(answered).toBe(false);
    gate.open();
    expect((await reply).status).toBe(404);
  });
});
