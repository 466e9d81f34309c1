import { type RawBuilder, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { jsonType } from '../../src/common/schema-drift.ts';
import { parseCitation } from '../../src/enrich/citation.ts';
import { responseDrift } from '../../src/enrich/contract.ts';
import { enrichThreads } from '../../src/enrich/enrich-threads.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { createPageWriter } from '../../src/enrich/page-group-commit.ts';
import { createThreadNames } from '../../src/enrich/thread-names.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { captureLog, simulatorOptions } from '../api/helpers/client-setup.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The thread API's JSON is data: keys that plain JavaScript objects inherit (`__proto__`,
 * `constructor`, `toString`, `hasOwnProperty`, `valueOf`) are fields like any other, in a
 * thread-list entry, a history entry, an artifact and a citation. And an error the code did not
 * expect on one thread fails that thread, not its whole batch. The simulator over HTTP (fault
 * `proto-keys`), enrichment into a real Postgres schema.
 */
const KEYS = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'];
// The type the simulator gives each key's value (src/simulator/faults.ts, PROTO_KEYS). A Map: in
// an object literal, `__proto__: 'object'` would not even be a key.
const TYPE = new Map([
  ['__proto__', 'object'],
  ['constructor', 'string'],
  ['toString', 'array'],
  ['hasOwnProperty', 'number'],
  ['valueOf', 'null'],
]);
const inherited = () =>
  JSON.parse(
    '{"__proto__":{"sim_polluted":true},"constructor":"c","toString":["t"],"hasOwnProperty":1,"valueOf":null}',
  ) as Record<string, unknown>;

describe('keys JavaScript objects inherit, in one response', () => {
  it('when a history entry, a citation and a thread-list entry carry them, then each is a new field of its JSON type', () => {
    const entry = {
      ...inherited(),
      message_id: '00000000-0000-4000-8000-000000000001',
      citations: [{ id: 'c1', ...inherited() }],
    };
    for (const source of ['history', 'artifact', 'thread'] as const) {
      const notes: Parameters<typeof responseDrift>[2] = [];
      responseDrift(source, entry, notes);
      const fresh = notes.filter((n) => n.kind === 'new_field').map((n) => `${n.path}:${n.actual}`);
      for (const k of KEYS) expect(fresh).toContain(`${k}:${TYPE.get(k)}`);
      if (source !== 'thread') {
        for (const k of KEYS) expect(fresh).toContain(`citations[].${k}:${TYPE.get(k)}`);
      }
    }
  });

  it('when a citation carries them, then its extra keeps every one as an own key, __proto__ included', () => {
    const r = parseCitation({ id: 'c1', url: 'https://example.test/', ...inherited() });
    expect(r.ok).toBe(true);
    const extra = r.ok ? r.value.extra : null;
    expect(Object.getPrototypeOf(extra)).toBe(Object.prototype);
    expect(Object.keys(extra ?? {}).sort()).toEqual(['url', ...KEYS].sort());
    expect(JSON.parse(JSON.stringify(extra))).toEqual({ url: 'https://example.test/', ...inherited() });
    expect(JSON.stringify(extra)).toContain('"__proto__":{"sim_polluted":true}');
  });

  it('when an object the service sent has a key "rawJSON", then its type is object, not number', () => {
    expect(jsonType(JSON.parse('{"rawJSON":"12"}'))).toBe('object');
    const raw = (JSON as unknown as { rawJSON(t: string): unknown }).rawJSON('12345678901234567890');
    expect(jsonType(raw)).toBe('number');
  });
});

describe('a thread API whose every object carries inherited keys', () => {
  let sim: Simulator;
  let tw: TestWarehouse;

  beforeAll(async () => {
    sim = await startSimulator({
      seed: 11,
      days: 1,
      recordsPerDay: 12,
      faults: 'proto-keys=history+artifact+thread',
      now: runningClock(PINNED),
    });
    tw = await createTestWarehouse({ prefix: 'svckeys' });
  });
  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
  });

  const q = async <T>(query: RawBuilder<T>) => (await query.execute(tw.w.db)).rows;

  it('when every thread is enriched, then each batch succeeds once, every entry, artifact and citation is stored with those keys in raw, each key is drift of its source, and the names come from the list', async () => {
    const listed = sim.truth.threads().map((t) => t.thread_id);
    for (const id of listed) {
      await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${id}, 'pending', now())`.execute(
        tw.w.db,
      );
    }
    const { log } = captureLog();
    const api = createServiceClient(simulatorOptions(sim), log);
    const ops = createEnrichOps({ db: tw.w.db, pool: tw.w.pool, api, log, concurrency: 4, pageSize: 5 });
    let batches = 0;
    for (let after: string | null = null; ; ) {
      const ids = await ops.listPendingThreads({ afterThreadId: after, limit: 10 });
      if (ids.length === 0) break;
      // A batch that threw here would be retried by Temporal, again and again.
      await ops.enrichThreads({ threadIds: ids, loadId: 'keys-1' });
      batches++;
      after = ids.at(-1) ?? null;
    }
    expect(batches).toBeGreaterThan(0);

    // Every thread ended as the service has it: none pending, none failed.
    const statuses = await q(sql<{ thread_id: string; enrich_status: string; thread_name: string | null }>`
      select thread_id::text, enrich_status, thread_name from threads order by thread_id`);
    const expected = (id: string) =>
      sim.truth.isDeleted(id) ? 'deleted' : sim.truth.isRestricted(id) ? 'forbidden' : 'done';
    expect(statuses.map((t) => [t.thread_id, t.enrich_status])).toEqual(
      [...listed].sort().map((id) => [id, expected(id)]),
    );
    // The thread list was read: every thread got its name, and the read is recorded as working.
    const names = new Map(sim.truth.threads().map((t) => [t.thread_id, t.thread_name]));
    for (const t of statuses) expect(t.thread_name).toBe(names.get(t.thread_id));
    expect(await q(sql`select failures, failures_total from thread_list_reads`)).toEqual([
      { failures: 0, failures_total: 0 },
    ]);

    // Every entry and artifact stored, none quarantined, and raw keeps each key with its value.
    const readable = listed.filter((id) => expected(id) === 'done');
    const entries = readable.flatMap((id) => sim.truth.threadHistory(id) ?? []);
    const artifactIds = new Set(entries.flatMap((e) => e.artifact_ids));
    const citations = entries.reduce((n, e) => n + e.citations.length, 0);
    expect(entries.length).toBeGreaterThan(0);
    expect(artifactIds.size).toBeGreaterThan(0);
    expect(citations).toBeGreaterThan(0);
    expect(await q(sql`select count(*)::int as n from rejected_records`)).toEqual([{ n: 0 }]);
    const keys = sql.raw(`array[${KEYS.map((k) => `'${k}'`).join(',')}]`);
    const kept = (table: string, column: string) =>
      q(sql<{ all: number; keeping: number }>`
        select count(*)::int as all,
               (count(*) filter (where ${sql.ref(column)} ?& ${keys}
                  and ${sql.ref(column)} -> '__proto__' = '{"sim_polluted": true}'::jsonb
                  and ${sql.ref(column)} -> 'constructor' = '"added by the simulator"'::jsonb
                  and ${sql.ref(column)} -> 'hasOwnProperty' = '1'::jsonb))::int as keeping
        from ${sql.table(table)}`);
    expect(await kept('thread_messages', 'raw')).toEqual([{ all: entries.length, keeping: entries.length }]);
    expect(await kept('artifacts', 'raw')).toEqual([{ all: artifactIds.size, keeping: artifactIds.size }]);
    const storedCitations = await kept('citations', 'extra');
    expect(storedCitations[0]?.all).toBeGreaterThanOrEqual(citations);
    expect(storedCitations[0]?.keeping).toBe(storedCitations[0]?.all);

    // Each key is drift of each source (and of its citations), of the type it came with.
    const drift = await q(sql<{ source: string; path: string; kind: string; actual_type: string }>`
      select source, path, kind, actual_type from schema_drift order by source, path`);
    const want = [
      ...['artifact', 'history'].flatMap((source) =>
        KEYS.flatMap((k) => [
          { source, path: k, kind: 'new_field', actual_type: TYPE.get(k) },
          { source, path: `citations[].${k}`, kind: 'new_field', actual_type: TYPE.get(k) },
        ]),
      ),
      ...KEYS.map((k) => ({ source: 'thread', path: k, kind: 'new_field', actual_type: TYPE.get(k) })),
    ];
    expect(drift).toEqual(expect.arrayContaining(want));
    expect(drift).toHaveLength(want.length);
  });
});

describe('an error on one thread of a batch', () => {
  let sim: Simulator;
  let tw: TestWarehouse;

  beforeAll(async () => {
    sim = await startSimulator({ seed: 11, days: 1, recordsPerDay: 12, now: runningClock(PINNED) });
    tw = await createTestWarehouse({ prefix: 'svcerr' });
  });
  afterAll(async () => {
    await sim?.close();
    await tw?.dispose();
  });

  it('when one thread of a batch meets an error the code did not expect, then that thread is failed with the error and the others are enriched', async () => {
    const db = tw.w.db;
    await sql`truncate threads, thread_messages, citations, artifacts, rejected_records`.execute(db);
    const readable = sim.truth
      .threads()
      .map((t) => t.thread_id)
      .filter((id) => !sim.truth.isDeleted(id) && !sim.truth.isRestricted(id))
      .sort()
      .slice(0, 4);
    expect(readable).toHaveLength(4);
    for (const id of readable) {
      await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${id}, 'pending', now())`.execute(
        db,
      );
    }
    const [broken = ''] = readable;
    const { log, text } = captureLog();
    const api = createServiceClient(simulatorOptions(sim), log);
    const real = createPageWriter(tw.w.pool);
    // A defect meeting one thread's data: its page write throws what no error mapping knows.
    const pages = {
      write: (p: Parameters<typeof real.write>[0]) =>
        p.threadId === broken
          ? Promise.reject(new TypeError("Cannot read properties of undefined (reading 'raw')"))
          : real.write(p),
    };
    const names = createThreadNames(api, db, log, 0);
    // One at a time, the broken thread first: nothing else of the batch has started when it fails.
    const counts = await enrichThreads(
      { db, pages, api, log, names, concurrency: 1, pageSize: 5 },
      { threadIds: readable, loadId: 'keys-2' },
    );
    expect(counts).toMatchObject({ threads: 4, done: 3, failed: 1 });
    const rows = await db
      .selectFrom('threads')
      .select(['thread_id', 'enrich_status', 'last_error', 'history_count'])
      .orderBy('thread_id')
      .execute();
    expect(rows.map((r) => r.enrich_status)).toEqual(['failed', 'done', 'done', 'done']);
    expect(rows[0]?.last_error).toBe(
      "unexpected error while enriching the thread: TypeError: Cannot read properties of undefined (reading 'raw')",
    );
    for (const r of rows.slice(1)) {
      expect(r.history_count).toBe(sim.truth.threadHistory(r.thread_id)?.length);
    }
    expect(text()).toContain('thread enrichment failed on an unexpected error');
  });

  it('when the warehouse refuses a write (an error with a SQLSTATE), then the batch still fails for a retry and the thread stays pending', async () => {
    const db = tw.w.db;
    await sql`truncate threads, thread_messages, citations, artifacts, rejected_records`.execute(db);
    const [id = ''] = sim.truth
      .threads()
      .map((t) => t.thread_id)
      .filter((t) => !sim.truth.isDeleted(t) && !sim.truth.isRestricted(t));
    await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${id}, 'pending', now())`.execute(
      db,
    );
    const { log } = captureLog();
    const api = createServiceClient(simulatorOptions(sim), log);
    const refused = Object.assign(new Error('could not extend file: No space left on device'), {
      code: '53100',
    });
    const err = await enrichThreads(
      {
        db,
        pages: { write: () => Promise.reject(refused) },
        api,
        log,
        names: createThreadNames(api, db, log, 0),
        concurrency: 1,
      },
      { threadIds: [id], loadId: 'keys-3' },
    ).catch((e: unknown) => e);
    expect(err).toBe(refused);
    const t = await db.selectFrom('threads').select(['enrich_status', 'enrich_attempts']).executeTakeFirst();
    expect(t).toEqual({ enrich_status: 'pending', enrich_attempts: 0 });
  });
});
