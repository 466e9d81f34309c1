import { sql } from 'kysely';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ParsedEntry } from '../../src/enrich/history-entry.ts';
import { createPageWriter } from '../../src/enrich/page-group-commit.ts';
import type { PageWrite } from '../../src/enrich/page-rows.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The page writer against a real Postgres schema: pages that wait share a statement, and a page
 * that the warehouse refuses fails alone.
 */
const uuid = (n: number, prefix = 'a') => `${prefix.repeat(8)}-0000-4000-8000-${String(n).padStart(12, '0')}`;

let tw: TestWarehouse;
beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'pagewriter' });
});
afterAll(async () => {
  await tw.dispose();
});
afterEach(async () => {
  await sql`truncate threads, thread_messages, citations, artifacts, rejected_records`.execute(tw.w.db);
});

function entry(n: number, over: Partial<ParsedEntry> = {}): ParsedEntry {
  return {
    message_id: uuid(n),
    role: 'user',
    text: `text ${n}`,
    created_at: '2026-01-01T08:00:00Z',
    is_cancelled: false,
    citations: [],
    artifact_ids: [],
    raw: { message_id: uuid(n), content: `text ${n}` },
    ...over,
  };
}

function page(thread: number, messages: ParsedEntry[]): PageWrite {
  return {
    threadId: uuid(thread, 'b'),
    loadId: 'L1',
    messages: messages.map((entry, position) => ({ position, entry })),
    artifacts: [],
    rejects: [],
    nextIndex: messages.length,
    finish: { status: 'done', requestedAt: null, name: `thread ${thread}` },
  };
}

/** The test pool, counting the statements sent through it. */
function countingPool() {
  const statements: number[] = [];
  const pool = {
    query: (config: { values: string[] }) => {
      statements.push(JSON.parse(config.values[0]!).length);
      return tw.w.pool.query(config as never);
    },
  } as unknown as Pick<pg.Pool, 'query'>;
  return { pool, statements };
}

async function addThreads(...ns: number[]) {
  for (const n of ns) {
    await sql`insert into threads (thread_id, enrich_status) values (${uuid(n, 'b')}, 'pending')`.execute(
      tw.w.db,
    );
  }
}

describe('page writer', () => {
  it('when pages arrive while a statement runs, then they are written together in the next one', async () => {
    await addThreads(1, 2, 3, 4);
    const { pool, statements } = countingPool();
    const writer = createPageWriter(pool, { maxInFlight: 1 });
    await Promise.all([1, 2, 3, 4].map((t) => writer.write(page(t, [entry(t * 10), entry(t * 10 + 1)]))));
    // The first page goes at once; the three that came meanwhile share the second statement.
    expect(statements).toEqual([1, 3]);
    const rows = await tw.w.db
      .selectFrom('threads')
      .select(['enrich_status', 'history_count', 'thread_name'])
      .orderBy('thread_id')
      .execute();
    expect(rows).toEqual(
      [1, 2, 3, 4].map((t) => ({ enrich_status: 'done', history_count: 2, thread_name: `thread ${t}` })),
    );
    const n = await sql<{ n: number }>`select count(*)::int n from thread_messages`.execute(tw.w.db);
    expect(n.rows[0]?.n).toBe(8);
  });

  it('when the warehouse refuses one page of a group, then only that page fails and the others are stored', async () => {
    await addThreads(1, 2, 3);
    const { pool, statements } = countingPool();
    const writer = createPageWriter(pool, { maxInFlight: 1 });
    const results = await Promise.allSettled([
      writer.write(page(1, [entry(10)])),
      writer.write(page(2, [entry(20, { created_at: 'not a time' })])),
      writer.write(page(3, [entry(30)])),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    // The group of the second and third failed as a whole, then each was written alone.
    expect(statements).toEqual([1, 2, 1, 1]);
    const rows = await tw.w.db
      .selectFrom('threads')
      .select(['thread_id', 'enrich_status'])
      .orderBy('thread_id')
      .execute();
    expect(rows.map((r) => r.enrich_status)).toEqual(['done', 'pending', 'done']);
  });

  it('when two threads name the same message, then their pages go in separate statements and the later wins', async () => {
    await addThreads(1, 2, 3);
    const { pool, statements } = countingPool();
    const writer = createPageWriter(pool, { maxInFlight: 1 });
    await Promise.all([
      writer.write(page(1, [entry(10)])),
      writer.write(page(2, [entry(99, { text: 'first' })])),
      writer.write(page(3, [entry(99, { text: 'second' })])),
    ]);
    expect(statements).toEqual([1, 1, 1]);
    const m = await tw.w.db
      .selectFrom('thread_messages')
      .select(['thread_id', 'text'])
      .where('message_id', '=', uuid(99))
      .executeTakeFirstOrThrow();
    expect(m).toEqual({ thread_id: uuid(3, 'b'), text: 'second' });
  });
});
