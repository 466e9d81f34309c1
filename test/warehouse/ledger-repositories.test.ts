import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sumCounts } from '../../src/common/counts.ts';
import { parseConfig } from '../../src/config.ts';
import { replayRejects } from '../../src/ingest/source/replay.ts';
import { createLogger } from '../../src/log.ts';
import {
  closeRun,
  findDayCompletedSince,
  markDayRunning,
  releaseUnfinishedDay,
  runStatus,
  startRun,
} from '../../src/warehouse/ledger.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

const log = createLogger({ level: 'silent', pretty: false });
const config = parseConfig({});

describe('the ledger and quarantine repositories', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse();
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  const dayRow = (day: string) =>
    tw.w.db
      .selectFrom('sync_days')
      .select(['status', 'last_error', '_load_id'])
      .where('day', '=', day)
      .executeTakeFirstOrThrow();

  it('when a day load ends unfinished, then a cancelled one goes back to pending and a failed one becomes failed', async () => {
    await markDayRunning(tw.w.db, '2026-10-01', 'load-a');
    await markDayRunning(tw.w.db, '2026-10-02', 'load-a');
    expect(await releaseUnfinishedDay(tw.w.db, '2026-10-01', { cancelled: true, reason: 'cancelled' })).toBe(
      'pending',
    );
    expect(
      await releaseUnfinishedDay(tw.w.db, '2026-10-02', { cancelled: false, reason: 'x'.repeat(3000) }),
    ).toBe('failed');
    expect(await dayRow('2026-10-01')).toMatchObject({ status: 'pending', last_error: 'cancelled' });
    const failed = await dayRow('2026-10-02');
    expect(failed.status).toBe('failed');
    expect(failed.last_error).toHaveLength(2000);
  });

  it('when a day was taken over by another load, then releasing it for the first load changes nothing', async () => {
    await markDayRunning(tw.w.db, '2026-10-03', 'load-a');
    await markDayRunning(tw.w.db, '2026-10-03', 'load-b');
    const changed = await releaseUnfinishedDay(tw.w.db, '2026-10-03', {
      cancelled: false,
      reason: 'activity out of retries',
      runId: 'load-a',
    });
    expect(changed).toBeNull();
    expect(await dayRow('2026-10-03')).toMatchObject({ status: 'running', _load_id: 'load-b' });
  });

  it('when a run closes with a load summary, then its row holds those counts (bytesRead as bytes_read)', async () => {
    await startRun(tw.w.db, { runId: 'run-counts', kind: 'import' });
    const summary = {
      ...sumCounts({ rowsRead: 5, inserted: 3, updated: 1, unchanged: 1, bytesRead: 321 }),
      days: [],
    };
    await closeRun(tw.w.db, 'run-counts', 'succeeded', summary);
    const r = await tw.w.db
      .selectFrom('sync_runs')
      .select(['rows_read', 'rows_inserted', 'rows_updated', 'rows_unchanged', 'rows_deleted', 'bytes_read'])
      .where('load_id', '=', 'run-counts')
      .executeTakeFirstOrThrow();
    expect(r).toEqual({
      rows_read: 5,
      rows_inserted: 3,
      rows_updated: 1,
      rows_unchanged: 1,
      rows_deleted: 0,
      bytes_read: 321,
    });
    expect(await runStatus(tw.w.db, 'run-counts')).toBe('succeeded');
    expect(await runStatus(tw.w.db, 'no-such-run')).toBeUndefined();
  });

  it('when a day completed after a time, then it is found with its ledger counts; before that time, not', async () => {
    await tw.w.db
      .insertInto('sync_days')
      .values({
        day: '2026-10-04',
        status: 'complete',
        _load_id: 'load-c',
        rows_read: 9,
        rows_inserted: 7,
        rows_rejected: 2,
        bytes: 900,
        lines_committed: 10,
        finished_at: new Date('2026-10-05T00:00:00Z'),
      })
      .execute();
    const found = await findDayCompletedSince(tw.w.db, '2026-10-04', new Date('2026-10-04T12:00:00Z'));
    expect(found).toEqual({
      runId: 'load-c',
      counts: sumCounts({ linesRead: 10, bytesRead: 900, rowsRead: 9, inserted: 7, rejected: 2 }),
    });
    expect(await findDayCompletedSince(tw.w.db, '2026-10-04', new Date('2026-10-06T00:00:00Z'))).toBeNull();
  });

  it('when history and prefix-only rejects are replayed, then the live thread is re-queued from the rejected entry, a deleted one stays deleted, and the prefix stays open as not replayable', async () => {
    const live = '11111111-1111-4111-8111-111111111111';
    const gone = '22222222-2222-4222-8222-222222222222';
    await tw.w.db
      .insertInto('threads')
      .values([
        { thread_id: live, enrich_status: 'done', history_count: 10 },
        { thread_id: gone, enrich_status: 'deleted', history_count: 10 },
      ])
      .execute();
    const base = { _load_id: 'enrich-load', raw: '{}', error_detail: 'stale rule' } as const;
    await tw.w.db
      .insertInto('rejected_records')
      .values([
        { ...base, source: 'history', thread_id: live, line_no: 4, error_code: 'invalid_entry' },
        { ...base, source: 'history', thread_id: gone, line_no: 2, error_code: 'invalid_entry' },
        { ...base, source: 'export', line_no: 1, error_code: 'line_too_long' },
      ])
      .execute();

    const r = await replayRejects(tw.w, config, log, { loadId: 'enrich-load' });
    expect(r).toMatchObject({ selected: 3, notReplayable: 1, threadsRequeued: 2, loaded: 0 });
    const threads = await tw.w.db
      .selectFrom('threads')
      .select(['thread_id', 'enrich_status', 'history_count'])
      .orderBy('thread_id')
      .execute();
    expect(threads).toEqual([
      { thread_id: live, enrich_status: 'pending', history_count: 4 },
      { thread_id: gone, enrich_status: 'deleted', history_count: 10 },
    ]);
    const rej = await tw.w.db
      .selectFrom('rejected_records')
      .select(['error_code', 'replay_result', (eb) => eb('replayed_at', 'is not', null).as('replayed')])
      .where('_load_id', '=', 'enrich-load')
      .orderBy('id')
      .execute();
    expect(rej).toEqual([
      { error_code: 'invalid_entry', replay_result: 'thread re-queued for enrichment', replayed: true },
      { error_code: 'invalid_entry', replay_result: 'thread re-queued for enrichment', replayed: true },
      {
        error_code: 'line_too_long',
        replay_result: 'not replayable: only a prefix of the over-long line was kept',
        replayed: false,
      },
    ]);
  });
});
