import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { manualClock } from './support/client.ts';

/**
 * Exports served at the same time: each response awaits its socket between lines, so the walks
 * of concurrent exports interleave. Each must still serve exactly its own day's lines.
 */

const clock = manualClock('2026-03-10T12:00:00.000Z');
const DAYS = ['2026-03-06', '2026-03-07', '2026-03-08', '2026-03-09'];
let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({ seed: 11, days: 6, recordsPerDay: 3000, now: clock.now });
});
afterAll(async () => {
  await sim.close();
});

describe('concurrent exports', () => {
  it('when four days are exported at once and read slowly, then each body is its day of the ground truth, line for line', async () => {
    const token = sim.credentials.serviceAccountToken;
    // Every response is opened before any body is read: the server meets a full socket buffer
    // (backpressure) in each, and so switches between the exports many times.
    const responses = await Promise.all(
      DAYS.map((day) =>
        fetch(`${sim.baseUrl}/v2/analytics/messages?start_date=${day}&end_date=${day}`, {
          headers: { authorization: `Bearer ${token}` },
        }),
      ),
    );
    const bodies = await Promise.all(responses.map((r) => r.text()));
    for (const [i, day] of DAYS.entries()) {
      expect(responses[i]!.status).toBe(200);
      const lines = bodies[i]!.split('\n').filter((l) => l !== '');
      const truth = sim.truth.exportDayLines(day);
      expect(truth.length).toBeGreaterThan(2000);
      // Counts first: a lost or repeated line shows as a count, before a long diff.
      expect({ day, lines: lines.length }).toEqual({ day, lines: truth.length });
      expect(lines).toEqual(truth);
    }
  });
});
