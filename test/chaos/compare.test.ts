import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareWithTruth, diffRows, type Row, wronglyDeleted } from '../../bench/lib/chaos/compare.ts';
import { type Erased, erasedInTruth } from '../../bench/lib/chaos/erased.ts';
import { shiftDay } from '../../src/common/civil-date.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { forget } from '../../src/warehouse/privacy/forget.ts';
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
        'erased',
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

/**
 * The same, after `crs-sync forget`: the comparison is told what was erased (erasedInTruth), and
 * must then take the erased records as absent by right, not report them, while any table that
 * still names an erased id is reported.
 */
describe('the chaos comparison after erasures (simulator, Postgres, dev server)', () => {
  const NOW = '2025-08-10T12:00:00Z';
  const days = [shiftDay('2025-08-10', -2), shiftDay('2025-08-10', -1)];
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator;
  let worker: Worker;
  let user = '';
  let thread = '';
  let erased: Erased;
  const q = async <T extends Row>(text: string, values: unknown[] = []) =>
    (await tw.w.pool.query<T>(text, values)).rows;
  const sync = (workflowId: string) =>
    h.client.workflow.execute(syncWindow, {
      taskQueue: h.taskQueue,
      workflowId,
      args: [{ kind: 'manual', from: days[0], to: days[1], enrich: true }],
    });

  beforeAll(async () => {
    h = await connectHarness('compare');
    tw = await createTestWarehouse({ prefix: 'tcmperased' });
    sim = await startSimulator({
      port: 0,
      now: () => new Date(NOW),
      seed: 78,
      days: days.length,
      recordsPerDay: 25,
      faults: 'poison=0.05,poison-history=0.2',
    });
    worker = await createTestWorker(h, {
      warehouse: tw.w,
      env: { ...sim.env(), CRS_RATE_LIMIT_RPS: '1000' },
    });
    // One worker run for both syncs: a worker runs once.
    await worker.runUntil(async () => {
      await sync('compare-erased-first');
      // A user, and a thread of another user whose history the service serves (so the erasure
      // takes enrichment's rows too), erased as an operator would; then the days loaded again, as
      // the chaos run's clean pass loads them after its erasures.
      const records = days.flatMap((d) => sim.truth.exportDay(d));
      const withHistory = records.filter(
        (r) =>
          sim.truth.threadHistory(r['Thread ID']) !== undefined && !sim.truth.isRestricted(r['Thread ID']),
      );
      user = withHistory[0]!['User ID'].toLowerCase();
      thread = withHistory.find((r) => r['User ID'].toLowerCase() !== user)!['Thread ID'].toLowerCase();
      await forget(tw.w.pool, { users: [user], threads: [thread] }, { reason: 'compare test' });
      await sync('compare-erased-again');
    });
    erased = erasedInTruth(sim, [user], [thread]);
  });

  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
    await h?.close();
  });

  it('when the erased users and threads are absent everywhere, then nothing is reported, and the ledger counts their lines as suppressed', async () => {
    expect(erased.messages.size).toBeGreaterThan(0);
    expect(erased.threads.size).toBeGreaterThan(1);
    const c = await compareWithTruth(tw.w, sim, days, erased);
    expect(c.differences).toEqual(Object.fromEntries(Object.keys(c.differences).map((t) => [t, []])));
    expect(c.compared.erased).toBe(erased.users.size + erased.threads.size + erased.messages.size);
    // Absent by right only because they were erased: told nothing, the comparison misses them.
    const blind = await compareWithTruth(tw.w, sim, days);
    expect(blind.differences.analytics_messages).toEqual(
      expect.arrayContaining([...erased.messages].map((m) => `analytics_messages ${m}: missing`)),
    );
    expect(blind.differences.sync_days).not.toEqual([]);
  });

  it('when a row of an erased user, a history entry of an erased thread and a quarantined line naming the user are still there, then each is reported in its table and as an erased id still held', async () => {
    const message = [...erased.messages][0]!;
    const userThread = [...erased.threads].find((t) => t !== thread)!;
    const [kept] = await q<{ id: string }>(
      'select message_id::text as id from analytics_messages order by message_id limit 1',
    );
    // A row of the erased user back in the export rows, as a load that missed the suppression would write it.
    await q(
      `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input, response,
                                       extra, record_hash, _source_line, _load_id, response_chars)
       select $2, $3, $4, message_time, message_date, input, response, extra, record_hash,
              _source_line, _load_id, response_chars
       from analytics_messages where message_id = $1`,
      [kept!.id, message, userThread, user],
    );
    // A history entry of the erased thread, as an enrichment page that missed it would write it.
    const entry = '00000000-0000-4000-8000-0000000e7a5e';
    await q(
      `insert into thread_messages (message_id, thread_id, position, role, text, raw) values ($1, $2, 0, 'user', 'hi', '{}')`,
      [entry, thread],
    );
    // A quarantined line naming the user (upper case) only in its raw bytes, in the internal schema.
    await q(
      `insert into rejected_records (_load_id, source, raw, raw_bytes, error_code, error_detail)
       values ('compare-test', 'export', 'a cut line', $1, 'bad_json', 'cut')`,
      [Buffer.from(`{"User ID":"${user.toUpperCase()}","Inp`)],
    );

    const c = await compareWithTruth(tw.w, sim, days, erased);
    expect(c.differences.analytics_messages).toEqual([`analytics_messages ${message}: not in the service`]);
    expect(c.differences.thread_messages).toEqual([`thread_messages ${entry}: not in the service`]);
    expect(c.differences.rejected_records).toEqual([
      expect.stringMatching(/^rejected_records export : unexpected a cut line/),
    ]);
    const held = c.differences.erased ?? [];
    expect(held).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          new RegExp(`^erased message ${message}: still in .*analytics_messages \\(1 row\\)`),
        ),
        expect.stringMatching(new RegExp(`^erased user ${user}: still in .*analytics_messages \\(1 row\\)`)),
        expect.stringMatching(new RegExp(`^erased user ${user}: still in .*rejected_records \\(1 row\\)`)),
        expect.stringMatching(new RegExp(`^erased thread ${thread}: still in .*thread_messages \\(1 row\\)`)),
      ]),
    );
    // One line per erased id written back, and no other.
    expect(held.map((l) => l.split(' ')[2]).sort()).toEqual(
      [message, user, thread, userThread].map((id) => `${id}:`).sort(),
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
