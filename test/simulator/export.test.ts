import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { type Checked, checkedClient, manualClock } from './support/client.ts';

/** The analytics export (spec §4.12): validation, file name, and the UTC date rules at their edges. */

const clock = manualClock('2026-03-10T12:00:00.000Z');
let sim: Simulator;
let api: Checked;
const EXPORT = '/v2/analytics/messages';

beforeAll(async () => {
  sim = await startSimulator({ seed: 5, days: 6, recordsPerDay: 300, now: clock.now });
  api = await checkedClient(sim);
});
afterAll(async () => {
  await sim.close();
});

async function exportLines(query: string): Promise<string[]> {
  const r = await api.call('GET', EXPORT, `${EXPORT}${query}`, { headers: api.sa() });
  expect(r.status, query).toBe(200);
  return r.text.split('\n').filter((l) => l !== '');
}

const utcDay = (time: string) => new Date(time).toISOString().slice(0, 10);
const sorted = (xs: string[]) => [...xs].sort();

describe('analytics export', () => {
  it('when a day is exported, then every line is a valid record, equal to the ground truth, with the documented file name', async () => {
    const r = await api.call('GET', EXPORT, `${EXPORT}?start_date=2026-03-08&end_date=2026-03-08`, {
      headers: api.sa(),
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-disposition')).toBe(
      'attachment; filename="message_history_20260310T120000Z.jsonl"',
    );
    api.validator.header('GET', EXPORT, 200, 'Content-Disposition', r.headers.get('content-disposition'));
    // Streamed: chunked transfer, no length known up front.
    expect(r.headers.get('content-length')).toBeNull();
    const lines = r.text.split('\n').filter((l) => l !== '');
    expect(lines.length).toBeGreaterThan(200);
    expect(lines).toEqual(sim.truth.exportDayLines('2026-03-08'));
    expect(r.text.endsWith('\n')).toBe(true);
  });

  it('when a reply falls at 23:59:59.999Z and is written with +02:00, then it belongs to that UTC day only', async () => {
    const day = await exportLines('?start_date=2026-03-07&end_date=2026-03-07');
    const next = await exportLines('?start_date=2026-03-08&end_date=2026-03-08');
    const edge = (l: string) =>
      (JSON.parse(l) as Record<string, string>)['Message Time'] === '2026-03-08T01:59:59.999+02:00';
    expect(day.filter(edge)).toHaveLength(1);
    expect(next.filter(edge)).toHaveLength(0);
  });

  it('when a reply falls at 00:00:00.000Z and is written with -05:00, then it belongs to the UTC day it starts, not the local one', async () => {
    const day = await exportLines('?start_date=2026-03-07&end_date=2026-03-07');
    const prev = await exportLines('?start_date=2026-03-06&end_date=2026-03-06');
    const edge = (l: string) =>
      (JSON.parse(l) as Record<string, string>)['Message Time'] === '2026-03-06T19:00:00.000-05:00';
    expect(day.filter(edge)).toHaveLength(1);
    expect(prev.filter(edge)).toHaveLength(0);
  });

  it('when Message Times carry non-Z offsets, then the day filter still goes by the UTC instant', async () => {
    const records = (await exportLines('?start_date=2026-03-08&end_date=2026-03-08')).map(
      (l) => JSON.parse(l) as Record<string, string>,
    );
    const times = records.map((r) => r['Message Time']!);
    expect(times.every((t) => utcDay(t) === '2026-03-08')).toBe(true);
    const offsets = new Set(times.map((t) => /(Z|[+-]\d{2}:\d{2})$/.exec(t)![1]));
    expect(offsets.size).toBeGreaterThan(5);
    expect(offsets).toContain('+00:00');
    // With and without fractional seconds.
    expect(times.some((t) => /:\d{2}\.\d{3}(Z|[+-])/.test(t))).toBe(true);
    expect(times.some((t) => /:\d{2}(Z|[+-]\d{2}:\d{2})$/.test(t))).toBe(true);
    // Some records show a different local date than their UTC day.
    expect(times.some((t) => t.slice(0, 10) !== '2026-03-08')).toBe(true);
  });

  it('when a two-day window is exported, then it equals the first day followed by the second', async () => {
    const both = await exportLines('?start_date=2026-03-07&end_date=2026-03-08');
    const a = await exportLines('?start_date=2026-03-07&end_date=2026-03-07');
    const b = await exportLines('?start_date=2026-03-08&end_date=2026-03-08');
    expect(both).toEqual([...a, ...b]);
  });

  it('when a bound is missing, then the window is open on that side', async () => {
    const days = sim.truth.days();
    expect(days[0]).toBe('2026-03-04');
    expect(days.at(-1)).toBe('2026-03-10');
    const linesOf = (ds: string[]) => ds.flatMap((d) => sim.truth.exportDayLines(d));
    const noStart = await exportLines('?end_date=2026-03-06');
    expect(sorted(noStart)).toEqual(sorted(linesOf(days.filter((d) => d <= '2026-03-06'))));
    const noEnd = await exportLines('?start_date=2026-03-09');
    expect(sorted(noEnd)).toEqual(sorted(linesOf(days.filter((d) => d >= '2026-03-09'))));
    const all = await exportLines('');
    expect(sorted(all)).toEqual(sorted(linesOf(days)));
    const nulls = await exportLines('?start_date=null&end_date=');
    expect(nulls).toEqual(all);
    // Today is exported up to now only.
    expect(
      sim.truth.exportDay('2026-03-10').every((r) => Date.parse(r['Message Time']) <= clock.now().getTime()),
    ).toBe(true);
  });

  it('when a date is malformed or the start is after the end, then the export answers 422', async () => {
    for (const q of [
      '?start_date=2026-02-30',
      '?start_date=2026-3-1',
      '?end_date=yesterday',
      '?start_date=2026-03-08T00:00:00Z',
      '?start_date=2026-03-09&end_date=2026-03-08',
    ]) {
      const r = await api.call('GET', EXPORT, `${EXPORT}${q}`, { headers: api.sa() });
      expect(r.status, q).toBe(422);
    }
    const same = await api.call('GET', EXPORT, `${EXPORT}?start_date=2026-03-08&end_date=2026-03-08`, {
      headers: api.sa(),
    });
    expect(same.status).toBe(200);
  });

  it('when records arrive late, then they appear in a day only after a later point in time', async () => {
    const c = manualClock('2026-03-10T01:00:00.000Z');
    const own = await startSimulator({ seed: 5, days: 6, recordsPerDay: 300, now: c.now });
    try {
      const before = new Set(own.truth.exportDayLines('2026-03-09'));
      c.set('2026-03-12T12:00:00.000Z');
      const after = own.truth.exportDayLines('2026-03-09');
      const arrived = after.filter((l) => !before.has(l));
      expect(arrived.length).toBeGreaterThan(0);
      // They are records of 2026-03-09 whose time was already past at the first look.
      for (const l of arrived) {
        const time = (JSON.parse(l) as Record<string, string>)['Message Time']!;
        expect(utcDay(time)).toBe('2026-03-09');
        expect(Date.parse(time)).toBeLessThan(Date.parse('2026-03-10T01:00:00.000Z'));
      }
    } finally {
      await own.close();
    }
  });

  it('when a thread is deleted as time passes, then its records leave the export and its history answers 404', async () => {
    const c = manualClock('2026-03-10T12:00:00.000Z');
    const own = await startSimulator({ seed: 5, days: 6, recordsPerDay: 300, now: c.now });
    const client = await checkedClient(own);
    try {
      const days = own.truth.days();
      const before = days.flatMap((d) => own.truth.exportDay(d));
      c.set('2026-03-20T12:00:00.000Z');
      const now = new Set(days.flatMap((d) => own.truth.exportDayLines(d)));
      const gone = before.filter((r) => !now.has(JSON.stringify(r)));
      expect(gone.length).toBeGreaterThan(0);
      for (const r of gone) expect(own.truth.isDeleted(r['Thread ID'])).toBe(true);
      const id = gone[0]!['Thread ID'];
      const h = await client.call('GET', '/v2/threads/{thread_id}/messages', `/v2/threads/${id}/messages`, {
        headers: client.v2(),
      });
      expect(h.status).toBe(404);
    } finally {
      await own.close();
    }
  });

  it('when export records are joined to thread history, then each Message ID is the reply (or cancellation) entry of its thread, at the same instant', () => {
    const records = sim.truth.exportDay('2026-03-07');
    let cancelled = 0;
    for (const r of records) {
      const history = sim.truth.threadHistory(r['Thread ID']);
      expect(history, r['Thread ID']).toBeDefined();
      const i = history!.findIndex((e) => e.message_id === r['Message ID'].toLowerCase());
      expect(i).toBeGreaterThan(0);
      const entry = history![i]!;
      expect(history![i - 1]).toMatchObject({ role: 'user', content: r.Input });
      expect(Date.parse(entry.created_at)).toBe(Date.parse(r['Message Time']));
      if (entry.status === 'cancelled') {
        cancelled++;
        expect(entry).toMatchObject({ role: 'system', content: 'User cancelled' });
        expect(r.Response).toBe('');
      } else {
        expect(entry).toMatchObject({ role: 'assistant', content: r.Response });
      }
    }
    expect(cancelled).toBeGreaterThan(0);
  });

  it('when records are generated, then some carry unknown keys and upper-case ids, and responses are long unicode', () => {
    const records = sim.truth.exportDay('2026-03-07');
    expect(records.some((r) => Object.keys(r).length > 6)).toBe(true);
    expect(records.some((r) => r['Message ID'] !== r['Message ID'].toLowerCase())).toBe(true);
    expect(records.some((r) => r['Thread ID'] !== r['Thread ID'].toLowerCase())).toBe(true);
    expect(records.some((r) => /[^\u0000-\u00ff]/.test(r.Response) && r.Response.length > 1000)).toBe(true);
    expect(records.some((r) => /\p{Extended_Pictographic}/u.test(r.Response))).toBe(true);
    const users = new Set(sim.truth.exportDay('2026-03-08').map((r) => r['User ID'].toLowerCase()));
    expect(users.size).toBeGreaterThan(50);
  });
});
