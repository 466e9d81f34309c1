import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { responseChars } from '../../src/ingest/merge/copy-binary.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The BI views of migrations/2026-11-22T01-00-00_bi_views.ts over a small hand-made warehouse
 * whose every figure is known: two users, three threads, two days, one soft-deleted row, one
 * message cancelled through its history entry and one with an empty response.
 */

const U1 = '00000000-0000-4000-8000-0000000000a1';
const U2 = '00000000-0000-4000-8000-0000000000a2';
const T1 = '00000000-0000-4000-8000-0000000000b1';
const T2 = '00000000-0000-4000-8000-0000000000b2';
const T3 = '00000000-0000-4000-8000-0000000000b3';
const m = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

let tw: TestWarehouse;

async function q<T>(text: string): Promise<T[]> {
  const r = await tw.w.pool.query(text);
  return r.rows as T[];
}

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'bi' });
  const db = tw.w.db;
  const row = (
    id: number,
    thread: string,
    user: string,
    time: string,
    response: string,
    deleted = false,
  ) => ({
    message_id: m(id),
    thread_id: thread,
    user_id: user,
    message_time: new Date(time),
    message_date: time.slice(0, 10),
    input: 'q',
    response,
    extra: null,
    record_hash: `h${id}`,
    _source_line: id,
    _load_id: 'L1',
    _deleted_at: deleted ? new Date() : null,
    line_hash: null,
    response_chars: responseChars(response),
  });
  await db
    .insertInto('analytics_messages')
    .values([
      row(1, T1, U1, '2026-11-01T10:00:00Z', 'abcd'), // 4 chars
      row(2, T1, U1, '2026-11-01T11:00:00Z', ' abcdefgh\n'), // 8 chars once trimmed
      row(3, T2, U2, '2026-11-01T12:00:00Z', ' \n '), // cancelled: blank response
      row(4, T2, U2, '2026-11-01T13:00:00Z', 'zz', true), // soft-deleted: counts nowhere
      row(5, T3, U1, '2026-11-02T09:00:00Z', 'User cancelled'), // cancelled through its history entry
      row(6, T3, U1, '2026-11-02T09:30:00Z', 'abcdef'), // 6 chars
    ])
    .execute();
  await db
    .insertInto('threads')
    .values([
      { thread_id: T1, thread_name: 'one', user_id: U1, enrich_status: 'done', history_count: 4 },
      { thread_id: T2, thread_name: null, user_id: U2, enrich_status: 'deleted', history_count: 0 },
      { thread_id: T3, thread_name: 'three', user_id: U1, enrich_status: 'pending', history_count: 2 },
    ])
    .execute();
  await db
    .insertInto('thread_messages')
    .values([
      { message_id: m(1), thread_id: T1, position: 1, is_cancelled: false, raw: JSON.stringify({}) },
      { message_id: m(2), thread_id: T1, position: 3, is_cancelled: false, raw: JSON.stringify({}) },
      { message_id: m(5), thread_id: T3, position: 1, is_cancelled: true, raw: JSON.stringify({}) },
    ])
    .execute();
  const cit = (ord: number, owner: string, type: string | null, name: string | null, artifact = false) => ({
    owner_kind: (artifact ? 'artifact' : 'message') as 'artifact' | 'message',
    owner_id: owner,
    ordinal: ord,
    message_id: artifact ? null : owner,
    artifact_id: artifact ? owner : null,
    thread_id: T1,
    citation_type: type,
    name,
    last_updated_at: new Date(`2026-10-0${ord + 1}T00:00:00Z`),
  });
  await db
    .insertInto('citations')
    .values([
      cit(0, m(1), 'web', 'Reuters'),
      cit(1, m(1), 'web', 'Reuters'),
      cit(0, m(2), 'web', 'Reuters'),
      cit(0, 'art-1', 'web', 'Reuters', true),
      cit(1, m(2), 'custom_doc', null),
    ])
    .execute();
  await db
    .insertInto('artifacts')
    .values({
      artifact_id: 'art-1',
      thread_id: T1,
      message_id: m(2),
      raw: JSON.stringify({}),
      fetched_via: 'v2',
    })
    .execute();
  await db
    .insertInto('sync_days')
    .values([
      { day: '2026-11-01', status: 'complete' },
      { day: '2026-11-02', status: 'complete' },
      { day: '2026-11-03', status: 'failed', last_error: 'boom' },
      { day: '2026-11-04', status: 'complete' },
    ])
    .execute();
  await db
    .insertInto('sync_runs')
    .values([
      {
        load_id: 'r1',
        kind: 'backfill',
        status: 'succeeded',
        started_at: new Date('2026-11-05T00:00:00Z'),
        finished_at: new Date('2026-11-05T00:01:00Z'),
      },
      { load_id: 'r2', kind: 'scheduled', status: 'failed', started_at: new Date('2026-11-06T00:00:00Z') },
    ])
    .execute();
  await db
    .insertInto('rejected_records')
    .values([
      { _load_id: 'r1', source: 'export', raw: 'x', error_code: 'e', error_detail: 'd', line_no: 1 },
      { _load_id: 'r1', source: 'export', raw: 'y', error_code: 'e', error_detail: 'd', line_no: 2 },
      { _load_id: 'r1', source: 'history', raw: 'z', error_code: 'e', error_detail: 'd', line_no: 3 },
      {
        _load_id: 'r1',
        source: 'export',
        raw: 'w',
        error_code: 'e',
        error_detail: 'd',
        line_no: 4,
        replayed_at: new Date(),
      },
    ])
    .execute();
});

afterAll(async () => {
  await tw?.dispose();
});

describe('BI views', () => {
  it('when messages are cancelled, soft-deleted or answered, then daily_usage counts each day from the live rows only', async () => {
    const rows = await q<Record<string, unknown>>(
      'select message_date::text as d, messages, active_users, active_threads, cancelled, avg_response_chars, median_response_chars from daily_usage order by 1',
    );
    expect(rows).toEqual([
      {
        d: '2026-11-01',
        messages: 3,
        active_users: 2,
        active_threads: 2,
        cancelled: 1,
        avg_response_chars: 6,
        median_response_chars: 6,
      },
      {
        d: '2026-11-02',
        messages: 2,
        active_users: 1,
        active_threads: 1,
        cancelled: 1,
        avg_response_chars: 6,
        median_response_chars: 6,
      },
    ]);
  });

  it('when a user has live messages on two days, then user_activity gives first/last seen, days, messages and threads', async () => {
    const rows = await q<Record<string, unknown>>(
      'select user_id::text as u, first_seen_at, last_seen_at, days_active, messages, threads from user_activity order by 1',
    );
    expect(rows).toEqual([
      {
        u: U1,
        first_seen_at: new Date('2026-11-01T10:00:00Z'),
        last_seen_at: new Date('2026-11-02T09:30:00Z'),
        days_active: 2,
        messages: 4,
        threads: 2,
      },
      {
        u: U2,
        first_seen_at: new Date('2026-11-01T12:00:00Z'),
        last_seen_at: new Date('2026-11-01T12:00:00Z'),
        days_active: 1,
        messages: 1,
        threads: 1,
      },
    ]);
  });

  it('when threads have history, citations and artifacts, then thread_summary counts them per thread', async () => {
    const rows = await q<Record<string, unknown>>(
      'select thread_id::text as t, thread_name, messages, history_count, history_entries, cancelled_entries, citations, artifacts, enrich_status from thread_summary order by 1',
    );
    expect(rows).toEqual([
      {
        t: T1,
        thread_name: 'one',
        messages: 2,
        history_count: 4,
        history_entries: 2,
        cancelled_entries: 0,
        citations: 5,
        artifacts: 1,
        enrich_status: 'done',
      },
      {
        t: T2,
        thread_name: null,
        messages: 1,
        history_count: 0,
        history_entries: 0,
        cancelled_entries: 0,
        citations: 0,
        artifacts: 0,
        enrich_status: 'deleted',
      },
      {
        t: T3,
        thread_name: 'three',
        messages: 2,
        history_count: 2,
        history_entries: 1,
        cancelled_entries: 1,
        citations: 0,
        artifacts: 0,
        enrich_status: 'pending',
      },
    ]);
  });

  it('when citations come from messages and artifacts, then citation_sources groups them by type and name', async () => {
    const rows = await q<Record<string, unknown>>(
      'select citation_type, name, citations, threads, messages, artifacts, last_updated_at from citation_sources order by citations desc',
    );
    expect(rows).toEqual([
      {
        citation_type: 'web',
        name: 'Reuters',
        citations: 4,
        threads: 1,
        messages: 2,
        artifacts: 1,
        last_updated_at: new Date('2026-10-02T00:00:00Z'),
      },
      {
        citation_type: 'custom_doc',
        name: '(unnamed)',
        citations: 1,
        threads: 1,
        messages: 1,
        artifacts: 0,
        last_updated_at: new Date('2026-10-02T00:00:00Z'),
      },
    ]);
  });

  it('when a failed day breaks the run of complete days, then sync_health stops the watermark before it and counts open rejects by source', async () => {
    const [h] = await q<Record<string, unknown>>('select * from sync_health');
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    const lag = Math.round((Date.parse(yesterday) - Date.parse('2026-11-02')) / 86_400_000);
    expect(h).toMatchObject({
      watermark: '2026-11-02',
      lag_days: Math.max(0, lag),
      first_day: '2026-11-01',
      last_day: '2026-11-04',
      complete_days: 3,
      failed_days: 1,
      running_days: 0,
      pending_days: 0,
      last_run_load_id: 'r2',
      last_run_status: 'failed',
      last_success_at: new Date('2026-11-05T00:01:00Z'),
      open_rejects: 3,
      open_rejects_export: 2,
      open_rejects_history: 1,
      open_rejects_artifact: 0,
      open_rejects_file: 0,
      threads_pending: 1,
      threads_failed: 0,
    });
  });

  it('when the ledger is empty, then sync_health still gives its one row with no watermark', async () => {
    const empty = await createTestWarehouse({ prefix: 'bi' });
    try {
      const r = await sql<Record<string, unknown>>`select * from sync_health`.execute(empty.w.db);
      expect(r.rows).toHaveLength(1);
      expect(r.rows[0]).toMatchObject({ watermark: null, lag_days: null, complete_days: 0, open_rejects: 0 });
    } finally {
      await empty.dispose();
    }
  });
});
