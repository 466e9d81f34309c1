import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  generateExportLines,
  type Simulator,
  startSimulator,
  writeExportDay,
} from '../../src/simulator/index.ts';
import { ByteWriter } from '../../src/simulator/text.ts';
import { type Checked, checkedClient, manualClock } from './support/client.ts';

/** The data set: deterministic from the seed, realistic in shape, and open to threads created via the API. */

const clock = manualClock('2026-09-20T18:30:00.000Z');
let sim: Simulator;
let api: Checked;

beforeAll(async () => {
  sim = await startSimulator({ seed: 77, days: 7, recordsPerDay: 300, now: clock.now });
  api = await checkedClient(sim);
});
afterAll(async () => {
  await sim.close();
});

describe('data set', () => {
  it('when two simulators share a seed, then exports and histories are identical; another seed differs', async () => {
    const twin = await startSimulator({ seed: 77, days: 7, recordsPerDay: 300, now: clock.now });
    const other = await startSimulator({ seed: 78, days: 7, recordsPerDay: 300, now: clock.now });
    try {
      for (const day of ['2026-09-15', '2026-09-18']) {
        expect(twin.truth.exportDayLines(day)).toEqual(sim.truth.exportDayLines(day));
        expect(other.truth.exportDayLines(day)).not.toEqual(sim.truth.exportDayLines(day));
      }
      const some = sim.truth.threads().slice(0, 20);
      for (const t of some)
        expect(twin.truth.threadHistory(t.thread_id)).toEqual(sim.truth.threadHistory(t.thread_id));
    } finally {
      await twin.close();
      await other.close();
    }
  });

  it('when the whole data set is read, then it has hundreds of users, multi-day threads, cancellations and renames', () => {
    const days = sim.truth.days();
    const records = days.flatMap((d) => sim.truth.exportDay(d).map((r) => ({ ...r, day: d })));
    expect(new Set(records.map((r) => r['User ID'].toLowerCase())).size).toBeGreaterThan(200);
    const daysOfThread = new Map<string, Set<string>>();
    for (const r of records) {
      const id = r['Thread ID'].toLowerCase();
      daysOfThread.set(id, (daysOfThread.get(id) ?? new Set()).add(r.day));
    }
    expect([...daysOfThread.values()].filter((s) => s.size >= 2).length).toBeGreaterThan(10);
    expect([...daysOfThread.values()].some((s) => s.size >= 3)).toBe(true);
    expect(records.filter((r) => r.Response === '').length).toBeGreaterThan(10);
    expect(sim.truth.threads().filter((t) => t.thread_name.endsWith('(renamed)')).length).toBeGreaterThan(5);
  });

  it('when threads are listed over HTTP, then the list equals the ground truth', async () => {
    const r = await api.call('GET', '/v2/threads', '/v2/threads', { headers: api.v2() });
    expect((r.body as { threads: unknown[] }).threads).toEqual(sim.truth.threads());
  });

  it('when a thread is created and answered through the API, then it joins the list, the history and the export', async () => {
    const created = await api.call('POST', '/v2/threads', '/v2/threads', {
      headers: { ...api.v2(), 'content-type': 'application/json' },
      body: JSON.stringify({ thread_name: 'Neuer Thread — 新しい' }),
    });
    const id = (created.body as { thread_id: string }).thread_id;
    const sent = await api.call('POST', '/v2/threads/{thread_id}/messages', `/v2/threads/${id}/messages`, {
      headers: api.v2(),
      body: new URLSearchParams({ message: 'Wie steht es um Ørsted?' }),
    });
    expect(sent.status).toBe(202);
    await api.call('GET', '/v2/threads/{thread_id}/events', `/v2/threads/${id}/events`, {
      headers: api.v2(),
    });
    expect(sim.truth.threads().find((t) => t.thread_id === id)).toMatchObject({
      thread_name: 'Neuer Thread — 新しい',
      message_count: 2,
    });
    const rec = sim.truth.exportDay('2026-09-20').find((r) => r['Thread ID'] === id);
    expect(rec).toMatchObject({
      Input: 'Wie steht es um Ørsted?',
      'Message Time': '2026-09-20T18:30:00.000Z',
    });
    expect(sim.truth.threadHistory(id)?.[1]?.message_id).toBe(rec?.['Message ID']);
  });

  it('when a message is sent to a procedural thread, then its history continues after the existing entries', async () => {
    const t = sim.truth.threads().find((x) => !sim.truth.isRestricted(x.thread_id) && x.message_count >= 2)!;
    const before = sim.truth.threadHistory(t.thread_id)!;
    await api.call('POST', '/v2/threads/{thread_id}/messages', `/v2/threads/${t.thread_id}/messages`, {
      headers: api.v2(),
      body: new URLSearchParams({ message: 'follow-up' }),
    });
    await api.call('GET', '/v2/threads/{thread_id}/events', `/v2/threads/${t.thread_id}/events`, {
      headers: api.v2(),
    });
    const after = sim.truth.threadHistory(t.thread_id)!;
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.slice(before.length).map((e) => e.role)).toEqual(['user', 'assistant']);
  });

  it('when lines are assembled as bytes (the served path), then they equal the UTF-8 of the string lines', () => {
    for (const day of sim.truth.days()) {
      const out = new ByteWriter(1024);
      const starts = [...sim.dataset.exportInto(Date.parse(day) / 86_400_000, out)];
      const lines = sim.truth.exportDayLines(day);
      expect(starts).toHaveLength(lines.length);
      expect(out.buf.subarray(0, out.off).equals(Buffer.from(lines.join(''), 'utf8'))).toBe(true);
    }
  });

  it('when a day is generated without HTTP, then it equals what the simulator serves for that day', async () => {
    const fixed = manualClock('2026-09-19T00:00:00.000Z');
    const served = await startSimulator({ seed: 77, days: 11, recordsPerDay: 300, now: fixed.now });
    try {
      const lines = [...generateExportLines({ seed: 77, day: '2026-09-15', recordsPerDay: 300 })];
      expect(lines).toEqual(served.truth.exportDayLines('2026-09-15'));
      const out = new PassThrough();
      const chunks: Buffer[] = [];
      out.on('data', (c: Buffer) => chunks.push(c));
      const counts = await writeExportDay({ seed: 77, day: '2026-09-15', recordsPerDay: 300 }, out);
      expect(counts.lines).toBe(lines.length);
      expect(Buffer.concat(chunks).toString('utf8')).toBe(lines.map((l) => `${l}\n`).join(''));
    } finally {
      await served.close();
    }
  });
});
