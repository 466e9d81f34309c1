import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareWithTruth, diffRows, type Row, wronglyDeleted } from '../../bench/lib/chaos/compare.ts';
import { shiftDay } from '../../src/common/civil-date.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { syncWindow } from '../../workflows/index.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { connectHarness, createTestWorker, type TemporalHarness } from '../temporal/harness.ts';

/**
 * The chaos run's verdict is compareWithTruth (and wronglyDeleted): "0 differences" means
 * something only if a warehouse that differs from the service is reported. Here it is fed a
 * warehouse that equals the simulator's ground truth (a clean sync with enrichment), then the
 * same warehouse with known differences written into it.
 */
describe('the chaos comparison against the ground truth (simulator, Postgres, dev server)', () => {
  const NOW = '2025-08-10T12:00:00Z';
  const days = [shiftDay('2025-08-10', -2), shiftDay('2025-08-10', -1)];
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator;
  let worker: Worker;
  const q = async <T extends Row>(text: string, values: unknown[] = []) =>
    (await tw.w.pool.query<T>(text, values)).rows;

  beforeAll(async () => {
    h = await connectHarness('compare');
    tw = await createTestWarehouse({ prefix: 'tcompare' });
    sim = await startSimulator({
      port: 0,
      now: () => new Date(NOW),
      seed: 77,
      days: days.length,
      recordsPerDay: 25,
      // Poison the service holds, so the quarantine's comparison has rows to compare.
      faults: 'poison=0.05,poison-history=0.2',
    });
    worker = await createTestWorker(h, {
      warehouse: tw.w,
      env: { ...sim.env(), CRS_RATE_LIMIT_RPS: '1000' },
    });
    await worker.runUntil(
      h.client.workflow.execute(syncWindow, {
        taskQueue: h.taskQueue,
        workflowId: 'compare-clean',
        args: [{ kind: 'manual', from: days[0], to: days[1], enrich: true }],
      }),
    );
  });

  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
    await h?.close();
  });

  it('when the warehouse equals the service, then no table has a difference, and every table was compared', async () => {
    const c = await compareWithTruth(tw.w, sim, days);
    expect(c.differences).toEqual(Object.fromEntries(Object.keys(c.differences).map((t) => [t, []])));
    expect(Object.keys(c.differences).sort()).toEqual(
      [
        'analytics_messages',
        'artifacts',
        'citations',
        'rejected_records',
        'rollups',
        'sync_days',
        'thread_messages',
        'threads',
      ].sort(),
    );
    expect(c.compared.analytics_messages).toBe(days.reduce((n, d) => n + sim.truth.exportDay(d).length, 0));
    expect(c.compared.threads).toBeGreaterThan(0);
    expect(c.compared.thread_messages).toBeGreaterThan(0);
    expect(c.compared.rejected_records).toBeGreaterThan(0);
    expect(await wronglyDeleted(tw.w, sim, days)).toEqual([]);
  });

  it('when rows are missing, extra, changed or deleted while the service holds them, then each is reported, and only those', async () => {
    const ids = (
      await q<{ id: string }>(
        'select message_id::text as id from analytics_messages where _deleted_at is null order by message_id limit 4',
      )
    ).map((r) => r.id);
    const [missing, changed, deleted, copied] = ids as [string, string, string, string];
    const extra = '00000000-0000-4000-8000-00000000beef';
    const response = (
      await q<{ response: string }>('select response from analytics_messages where message_id = $1', [
        changed,
      ])
    )[0]!.response;
    await q('delete from analytics_messages where message_id = $1', [missing]);
    // Edited at its start: the report shows the first 120 characters of each side.
    await q(`update analytics_messages set response = '(edited) ' || response where message_id = $1`, [
      changed,
    ]);
    // A row whose delete should have been held: the warehouse marked it deleted, the service has it.
    await q('update analytics_messages set _deleted_at = now() where message_id = $1', [deleted]);
    await q(
      `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input, response,
                                       extra, record_hash, _source_line, _load_id, response_chars)
       select $2, thread_id, user_id, message_time, message_date, input, response, extra, record_hash,
              _source_line, _load_id, response_chars
       from analytics_messages where message_id = $1`,
      [copied, extra],
    );

    const c = await compareWithTruth(tw.w, sim, days);
    expect([...c.differences.analytics_messages!].sort()).toEqual(
      [
        `analytics_messages ${missing}: missing`,
        `analytics_messages ${changed}: response is ${JSON.stringify(`(edited) ${response}`).slice(0, 120)}, expected ${JSON.stringify(response).slice(0, 120)}`,
        `analytics_messages ${deleted}: deleted is true, expected false`,
        `analytics_messages ${extra}: not in the service`,
      ].sort(),
    );
    expect(await wronglyDeleted(tw.w, sim, days)).toEqual([`analytics_messages ${deleted}: deleted`]);
    // The enrichment's tables were not touched: nothing is reported there.
    for (const t of ['threads', 'thread_messages', 'artifacts', 'citations']) {
      expect([t, c.differences[t]]).toEqual([t, []]);
    }
  });

  it('when the enrichment, the ledger and the quarantine differ, then each difference is reported in its table', async () => {
    const [thread] = await q<{ id: string }>(
      `select thread_id::text as id from threads where enrich_status = 'done' order by thread_id limit 1`,
    );
    const [entry] = await q<{ id: string }>(
      'select message_id::text as id from thread_messages order by message_id limit 1',
    );
    const [reject] = await q<{ id: number; raw: string }>(
      `select id::int, raw from rejected_records where source = 'export' order by id limit 1`,
    );
    await q(`update threads set enrich_status = 'failed' where thread_id = $1`, [thread!.id]);
    await q('delete from thread_messages where message_id = $1', [entry!.id]);
    await q('delete from rejected_records where id = $1', [reject!.id]);
    await q('update sync_days set rows_rejected = rows_rejected + 1 where day = $1', [days[0]]);

    const c = await compareWithTruth(tw.w, sim, days);
    expect(c.differences.threads).toEqual([
      `threads ${thread!.id}: enrich_status is "failed", expected "done"`,
    ]);
    expect(c.differences.thread_messages).toEqual([`thread_messages ${entry!.id}: missing`]);
    expect(c.differences.rejected_records).toEqual([
      `rejected_records export line: missing ${reject!.raw.slice(0, 100)}`,
    ]);
    expect(c.differences.sync_days).toHaveLength(1);
    expect(c.differences.sync_days?.[0]).toMatch(
      new RegExp(`^sync_days ${days[0]}: rows_rejected is \\d+, expected \\d+$`),
    );
  });
});

describe('diffRows', () => {
  const at = new Date('2025-08-09T10:00:00.000Z');
  const expected = new Map<string, Row>([
    ['a', { n: 1, at, extra: { x: 1, y: [1, 2] } }],
    ['b', { n: 2, at: null, extra: null }],
  ]);

  it('when both sides hold the same rows (a date as a Date or its ISO text, object keys in another order), then nothing is reported', () => {
    const out: string[] = [];
    const actual = new Map<string, Row>([
      ['b', { n: 2, at: null, extra: null, ignored: 'a column the expectation does not name' }],
      ['a', { extra: { y: [1, 2], x: 1 }, at: at.toISOString(), n: 1 }],
    ]);
    diffRows('t', expected, actual, out);
    expect(out).toEqual([]);
  });

  it('when a row is missing, one is extra and a field differs (in type, in a nested value, null against a value), then each is one line', () => {
    const out: string[] = [];
    const actual = new Map<string, Row>([
      ['a', { n: '1', at, extra: { x: 1, y: [2, 1] } }],
      ['c', { n: 3 }],
    ]);
    diffRows('t', expected, actual, out);
    expect(out).toEqual([
      't a: n is "1", expected 1',
      't a: extra is {"x":1,"y":[2,1]}, expected {"x":1,"y":[1,2]}',
      't b: missing',
      't c: not in the service',
    ]);
    const nulls: string[] = [];
    diffRows('t', new Map([['b', { at: null }]]), new Map([['b', { at }]]), nulls);
    expect(nulls).toEqual([`t b: at is "${at.toISOString()}", expected null`]);
  });
});
