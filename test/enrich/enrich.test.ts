import type { ServerResponse } from 'node:http';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { captureLog, options, SECRETS } from '../api/helpers/client-setup.ts';
import { type ScriptedServer, sendJson, startScriptedServer } from '../api/helpers/scripted-server.ts';
import { cliSync } from '../helpers/cli.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Enrichment against a scripted service over real HTTP and a real Postgres schema.
 */
const uuid = (n: number, prefix = 'a') => `${prefix.repeat(8)}-0000-4000-8000-${String(n).padStart(12, '0')}`;
const T1 = uuid(1, 'b');
const T2 = uuid(2, 'b');
const T3 = uuid(3, 'b');

interface FakeThread {
  name: string;
  history: unknown[];
  /** Answer every history request with this status instead. */
  status?: number;
  /** Answer every history request with a body that never ends. */
  endless?: boolean;
  /** Answer the next history request for this start_index with 500 (then forget it). */
  failStart?: number;
}

/** A 200 JSON answer that never ends (until the client goes away). */
function sendEndless(res: ServerResponse, start: string) {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.write(start);
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  const pump = () => {
    while (!res.destroyed && res.write(chunk)) {}
  };
  res.on('drain', pump);
  pump();
}

const citation = (i: number, extra: Record<string, unknown> = {}) => ({
  id: `c${i}`,
  internal_id: `i${i}`,
  citation_type: 'web',
  name: `Source ${i}`,
  inline_offset: i,
  summary: 's',
  last_updated_at: '2026-01-01T00:00:00Z',
  is_snippet: false,
  ...extra,
});

const msg = (n: number, over: Record<string, unknown> = {}) => ({
  message_id: uuid(n),
  role: n % 2 === 0 ? 'user' : 'assistant',
  content: `text ${n}`,
  created_at: '2026-01-01T10:00:00+02:00',
  citations: [],
  artifact_ids: [],
  status: 'completed',
  ...over,
});

let tw: TestWarehouse;
let server: ScriptedServer | undefined;
const threads = new Map<string, FakeThread>();
const artifacts = new Map<string, unknown>();
let listStatus = 200;

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'enrich' });
});
afterAll(async () => {
  await tw.dispose();
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  threads.clear();
  artifacts.clear();
  listStatus = 200;
  await sql`truncate threads, thread_messages, citations, artifacts, rejected_records, thread_list_reads`.execute(
    tw.w.db,
  );
});

function handle(req: { path: string; query: URLSearchParams }, res: ServerResponse) {
  if (req.path === '/v2/threads') {
    if (listStatus !== 200) return sendJson(res, listStatus, { detail: 'no' });
    return sendJson(res, 200, {
      threads: [...threads].map(([id, t]) => ({
        thread_id: id,
        thread_name: t.name,
        message_count: t.history.length,
      })),
    });
  }
  let m = /^\/v2\/threads\/([^/]+)\/messages$/.exec(req.path);
  if (m) {
    const t = threads.get(m[1]!);
    if (!t) return sendJson(res, 404, { detail: 'Thread not found' });
    if (t.status) return sendJson(res, t.status, { detail: 'nope' });
    if (t.endless) return sendEndless(res, '{"messages":[');
    const s = Number(req.query.get('start_index'));
    if (t.failStart === s) {
      t.failStart = undefined;
      return sendJson(res, 500, { detail: 'down' });
    }
    const n = Number(req.query.get('limit_num'));
    return sendJson(res, 200, { messages: t.history.slice(s, s + n) });
  }
  m = /^\/v2\/threads\/([^/]+)\/artifacts\/([^/]+)$/.exec(req.path);
  if (m) {
    const a = artifacts.get(m[2]!);
    if (a === undefined || a === 'legacy') return sendJson(res, 404, { detail: 'Artifact not found' });
    if (a === 'endless') return sendEndless(res, '{"artifact":{"val":"');
    return sendJson(res, 200, { artifact: a });
  }
  m = /^\/legacy\/client\/v2\/thread\/([^/]+)\/artifact\/([^/]+)$/.exec(req.path);
  if (m && artifacts.get(m[2]!) === 'legacy') {
    return sendJson(res, 200, {
      artifact_id: m[2],
      artifact: {
        output_type: 'text',
        title: 'L',
        citations: [],
        val: 'legacy',
        resolved_text_objects: false,
      },
    });
  }
  sendJson(res, 404, { detail: 'Not Found' });
}

async function setup(
  pending: string[],
  over: { pageSize?: number; maxRetries?: number; maxResponseBytes?: number } = {},
) {
  server = await startScriptedServer((req, res) => handle(req, res));
  const { log } = captureLog();
  const api = createServiceClient(
    options(server.url, {
      legacyBaseUrl: `${server.url}/legacy`,
      apiKey: SECRETS.apiKey,
      maxRetries: over.maxRetries ?? 1,
      ...(over.maxResponseBytes ? { maxResponseBytes: over.maxResponseBytes } : {}),
    }),
    log,
  );
  for (const id of pending) {
    await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${id}, 'pending', now())`.execute(
      tw.w.db,
    );
  }
  const ops = createEnrichOps({
    db: tw.w.db,
    pool: tw.w.pool,
    api,
    log,
    concurrency: 4,
    pageSize: over.pageSize ?? 2,
    threadListTtlMs: 0,
  });
  return { ops, srv: server };
}

const db = () => tw.w.db;

/** The real CLI against the test's warehouse; it must exit 0. */
function cli(args: string[]): string {
  const r = cliSync(args, { env: { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema }, tmpPrefix: 'crs-enrich-' });
  expect({ status: r.code, stderr: r.stderr }).toMatchObject({ status: 0 });
  return r.stdout;
}

/** The incidents of one alert key, as `crs-sync alerts list --json` shows them. */
function alertsOf(
  key: string,
): Array<{ key: string; kind: string; summary: string; resolvedAt: string | null }> {
  const { incidents } = JSON.parse(cli(['alerts', 'list', '--json'])) as {
    incidents: Array<{ key: string; kind: string; summary: string; resolvedAt: string | null }>;
  };
  return incidents.filter((i) => i.key === key);
}

describe('enrichThreads', () => {
  it('when a pending thread is enriched, then messages, citations, artifacts and the name are stored and it is done', async () => {
    const table = { columns: ['a'], rows: [[1]] };
    artifacts.set('art-1', {
      output_type: 'table',
      title: 'T',
      citations: [citation(9, { data_point: 0 })],
      val: JSON.stringify(table),
      resolved_text_objects: true,
    });
    threads.set(T1, {
      name: 'Research A',
      history: [
        msg(0),
        msg(1, {
          citations: [citation(1), citation(2, { url: 'https://x.example' })],
          artifact_ids: ['art-1'],
        }),
        msg(2),
        msg(3, { role: 'system', content: 'User cancelled', status: 'cancelled' }),
        msg(4),
      ],
    });
    const { ops } = await setup([T1]);
    const progress: number[] = [];
    const counts = await ops.enrichThreads({
      threadIds: [T1],
      loadId: 'L1',
      onProgress: (c) => progress.push(c.messages),
    });
    expect(counts).toMatchObject({ threads: 1, done: 1, messages: 5, artifacts: 1, failed: 0 });
    // Three pages of two, then the finished thread: progress after each (the activity's heartbeat).
    expect(progress).toEqual([2, 4, 5, 5]);

    const t = await db()
      .selectFrom('threads')
      .selectAll()
      .where('thread_id', '=', T1)
      .executeTakeFirstOrThrow();
    expect(t).toMatchObject({
      enrich_status: 'done',
      history_count: 5,
      thread_name: 'Research A',
      last_error: null,
    });
    const ms = await db().selectFrom('thread_messages').selectAll().orderBy('position').execute();
    expect(ms.map((m) => [m.position, m.role, m.text, m.is_cancelled])).toEqual([
      [0, 'user', 'text 0', false],
      [1, 'assistant', 'text 1', false],
      [2, 'user', 'text 2', false],
      [3, 'system', 'User cancelled', true],
      [4, 'user', 'text 4', false],
    ]);
    expect(ms[0]?.created_at?.toISOString()).toBe('2026-01-01T08:00:00.000Z');
    expect(ms[1]?.raw).toEqual(threads.get(T1)?.history[1]);

    const cs = await db()
      .selectFrom('citations')
      .selectAll()
      .orderBy('owner_kind')
      .orderBy('ordinal')
      .execute();
    expect(cs.map((c) => [c.owner_kind, c.ordinal, c.citation_id, c.extra])).toEqual([
      ['artifact', 0, 'c9', { data_point: 0 }],
      ['message', 0, 'c1', null],
      ['message', 1, 'c2', { url: 'https://x.example' }],
    ]);
    expect(cs[0]).toMatchObject({ artifact_id: 'art-1', message_id: uuid(1), thread_id: T1 });
    const a = await db().selectFrom('artifacts').selectAll().executeTakeFirstOrThrow();
    expect(a).toMatchObject({
      artifact_id: 'art-1',
      message_id: uuid(1),
      output_type: 'table',
      fetched_via: 'v2',
    });
    expect(a.val_json).toEqual(table);
  });

  it('when the history grew since the last enrichment, then only the new entries are read, from one entry before the stored position', async () => {
    threads.set(T1, { name: 'n', history: [msg(0), msg(1), msg(2)] });
    const { ops, srv } = await setup([T1]);
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    threads.get(T1)!.history.push(msg(3), msg(4));
    await sql`update threads set enrich_status = 'pending', enrich_requested_at = now()`.execute(db());
    const before = srv.seen.length;
    const counts = await ops.enrichThreads({ threadIds: [T1], loadId: 'L2' });
    expect(counts.messages).toBe(2);
    const starts = srv.seen
      .slice(before)
      .filter((s) => s.path.endsWith('/messages'))
      .map((s) => s.query.get('start_index'));
    // One entry early (the change check), and no request more than reading from 3 would cost.
    expect(starts).toEqual(['2', '4']);
    const positions = await db()
      .selectFrom('thread_messages')
      .select('position')
      .orderBy('position')
      .execute();
    expect(positions.map((p) => p.position)).toEqual([0, 1, 2, 3, 4]);
  });

  /** Every stored row of the warehouse that a history decides, in a comparable order. */
  async function stored() {
    const messages = await db()
      .selectFrom('thread_messages')
      .select(['message_id', 'position'])
      .orderBy('position')
      .execute();
    const artifactRows = await db()
      .selectFrom('artifacts')
      .select(['artifact_id', 'message_id'])
      .orderBy('artifact_id')
      .execute();
    const cites = await db()
      .selectFrom('citations')
      .select(['owner_kind', 'owner_id', 'ordinal'])
      .orderBy('owner_kind')
      .orderBy('owner_id')
      .orderBy('ordinal')
      .execute();
    const t = await db()
      .selectFrom('threads')
      .select(['history_count', 'enrich_status'])
      .executeTakeFirstOrThrow();
    return { messages, artifacts: artifactRows, citations: cites, thread: t };
  }

  const art = (title: string) => ({
    output_type: 'text',
    title,
    citations: [citation(20)],
    val: 'v',
    resolved_text_objects: false,
  });

  it('when entries were removed upstream, then the history is read again from 0 and the warehouse holds exactly what is left', async () => {
    artifacts.set('art-2', art('two'));
    artifacts.set('art-4', art('four'));
    threads.set(T1, {
      name: 'n',
      history: [
        msg(0),
        msg(1),
        msg(2, { citations: [citation(1)], artifact_ids: ['art-2'] }),
        msg(3),
        msg(4, { artifact_ids: ['art-4'] }),
      ],
    });
    const { ops, srv } = await setup([T1]);
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    expect((await stored()).messages).toHaveLength(5);
    const h = threads.get(T1)!.history;
    h.splice(2, 1);
    h.splice(3, 1);
    await sql`update threads set enrich_status = 'pending', enrich_requested_at = now()`.execute(db());
    const before = srv.seen.length;
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L2' });
    const starts = srv.seen
      .slice(before)
      .filter((r) => r.path.endsWith('/messages'))
      .map((r) => r.query.get('start_index'));
    // Position 4 asked for (one before the 5 stored), nothing there: read again from 0.
    expect(starts).toEqual(['4', '0', '2']);
    expect(await stored()).toEqual({
      messages: [
        { message_id: uuid(0), position: 0 },
        { message_id: uuid(1), position: 1 },
        { message_id: uuid(3), position: 2 },
      ],
      artifacts: [],
      citations: [],
      thread: { history_count: 3, enrich_status: 'done' },
    });
  });

  it('when the last stored entry was replaced upstream, then the history is read again and moved or renamed entries are stored as they are now', async () => {
    artifacts.set('art-1', art('one'));
    artifacts.set('art-3', art('three'));
    threads.set(T1, {
      name: 'n',
      history: [
        msg(0),
        msg(1, { artifact_ids: ['art-1'], citations: [citation(1), citation(2)] }),
        msg(2),
        msg(3, { artifact_ids: ['art-3'] }),
      ],
    });
    const { ops, srv } = await setup([T1]);
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    // A regenerated answer: entry 3 is served under a new id and names another artifact; entry 1
    // no longer names its artifact, and a new entry came after.
    artifacts.set('art-9', art('nine'));
    threads.get(T1)!.history = [
      msg(0),
      msg(1, { citations: [citation(1)] }),
      msg(2),
      msg(13, { artifact_ids: ['art-9'] }),
      msg(14),
    ];
    await sql`update threads set enrich_status = 'pending', enrich_requested_at = now()`.execute(db());
    const before = srv.seen.length;
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L2' });
    const starts = srv.seen
      .slice(before)
      .filter((r) => r.path.endsWith('/messages'))
      .map((r) => r.query.get('start_index'));
    expect(starts).toEqual(['3', '0', '2', '4']);
    expect(await stored()).toEqual({
      messages: [
        { message_id: uuid(0), position: 0 },
        { message_id: uuid(1), position: 1 },
        { message_id: uuid(2), position: 2 },
        { message_id: uuid(13), position: 3 },
        { message_id: uuid(14), position: 4 },
      ],
      artifacts: [{ artifact_id: 'art-9', message_id: uuid(13) }],
      citations: [
        { owner_kind: 'artifact', owner_id: 'art-9', ordinal: 0 },
        { owner_kind: 'message', owner_id: uuid(1), ordinal: 0 },
      ],
      thread: { history_count: 5, enrich_status: 'done' },
    });
  });

  it('when a re-read stops part-way, then the next run goes on from its checkpoint and the warehouse still ends equal to the service', async () => {
    artifacts.set('art-0', art('zero'));
    threads.set(T1, {
      name: 'n',
      history: [msg(0, { artifact_ids: ['art-0'] }), msg(1), msg(2), msg(3), msg(4), msg(5)],
    });
    const { ops } = await setup([T1], { maxRetries: 0 });
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    const t = threads.get(T1)!;
    t.history.shift();
    // The re-read stores [1, 2] at 0..1, then fails on its second page.
    t.failStart = 2;
    await sql`update threads set enrich_status = 'pending', enrich_requested_at = now()`.execute(db());
    await expect(ops.enrichThreads({ threadIds: [T1], loadId: 'L2' })).rejects.toMatchObject({
      retryable: true,
    });
    expect((await stored()).thread).toEqual({ history_count: 2, enrich_status: 'pending' });
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L3' });
    expect(await stored()).toEqual({
      messages: [1, 2, 3, 4, 5].map((n, position) => ({ message_id: uuid(n), position })),
      artifacts: [],
      citations: [],
      thread: { history_count: 5, enrich_status: 'done' },
    });
  });

  it('when a history comes back empty though entries are stored, then they are kept and the thread fails with the reason', async () => {
    artifacts.set('art-1', art('one'));
    threads.set(T1, {
      name: 'n',
      history: [msg(0, { artifact_ids: ['art-1'], citations: [citation(1)] }), msg(1)],
    });
    const { ops } = await setup([T1]);
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    const before = await stored();
    threads.get(T1)!.history = [];
    await sql`update threads set enrich_status = 'pending', enrich_requested_at = now()`.execute(db());
    const counts = await ops.enrichThreads({ threadIds: [T1], loadId: 'L2' });
    expect(counts.failed).toBe(1);
    expect(await stored()).toEqual({ ...before, thread: { history_count: 2, enrich_status: 'failed' } });
    const t = await db().selectFrom('threads').select('last_error').executeTakeFirstOrThrow();
    expect(t.last_error).toContain('the history came back empty, though 2 entries of it are stored');
  });

  it('when the last stored entry was quarantined and nothing changed, then one request confirms it and no row is rewritten', async () => {
    threads.set(T1, { name: 'n', history: [msg(0), msg(1), { message_id: 'not-a-uuid', role: 'user' }] });
    const { ops, srv } = await setup([T1]);
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    const rows = async () =>
      (await sql<{ x: string }>`select xmin::text as x from thread_messages order by position`.execute(db()))
        .rows;
    const before = await rows();
    expect(before).toHaveLength(2);
    await sql`update threads set enrich_status = 'pending', enrich_requested_at = now()`.execute(db());
    const n = srv.seen.length;
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L2' });
    const starts = srv.seen
      .slice(n)
      .filter((r) => r.path.endsWith('/messages'))
      .map((r) => r.query.get('start_index'));
    expect(starts).toEqual(['2']);
    expect(await rows()).toEqual(before);
  });

  it('when the last stored entry was quarantined and another entry took its place, then the history is read again', async () => {
    threads.set(T1, { name: 'n', history: [msg(0), msg(1), { message_id: 'not-a-uuid', role: 'user' }] });
    const { ops, srv } = await setup([T1]);
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    threads.get(T1)!.history = [msg(0), msg(11), msg(12)];
    await sql`update threads set enrich_status = 'pending', enrich_requested_at = now()`.execute(db());
    const n = srv.seen.length;
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L2' });
    const starts = srv.seen
      .slice(n)
      .filter((r) => r.path.endsWith('/messages'))
      .map((r) => r.query.get('start_index'));
    expect(starts).toEqual(['2', '0', '2']);
    expect((await stored()).messages).toEqual([
      { message_id: uuid(0), position: 0 },
      { message_id: uuid(11), position: 1 },
      { message_id: uuid(12), position: 2 },
    ]);
  });

  it('when the thread list shows fewer messages than stored, then a done thread is queued again', async () => {
    threads.set(T1, { name: 'n', history: [msg(0), msg(1), msg(2)] });
    const { ops } = await setup([T1]);
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    threads.get(T1)!.history.pop();
    threads.set(T2, { name: 'other', history: [] });
    await sql`insert into threads (thread_id, enrich_status) values (${T2}, 'pending')`.execute(db());
    await ops.enrichThreads({ threadIds: [T2], loadId: 'L2' });
    expect(await ops.listPendingThreads({ afterThreadId: null, limit: 10 })).toEqual([T1]);
  });

  it('when an artifact or a history page is an answer without end, then the artifact is quarantined, the thread failed, and the batch finishes', async () => {
    artifacts.set('art-big', 'endless');
    threads.set(T1, { name: 'n', history: [msg(0, { artifact_ids: ['art-big'] }), msg(1)] });
    threads.set(T2, { name: 'm', history: [msg(2)], endless: true });
    threads.set(T3, { name: 'o', history: [msg(3)] });
    const { ops } = await setup([T1, T2, T3], { maxResponseBytes: 256 * 1024 });
    const counts = await ops.enrichThreads({ threadIds: [T1, T2, T3], loadId: 'L1' });
    expect(counts).toMatchObject({ done: 2, failed: 1, messages: 3, artifacts: 0 });
    const status = await db()
      .selectFrom('threads')
      .select(['thread_id', 'enrich_status', 'last_error'])
      .orderBy('thread_id')
      .execute();
    expect(status.map((t) => t.enrich_status)).toEqual(['done', 'failed', 'done']);
    expect(status[1]!.last_error).toContain('CRS_MAX_RESPONSE_BYTES');
    const rejected = await db()
      .selectFrom('rejected_records')
      .select(['source', 'source_name', 'error_code'])
      .execute();
    expect(rejected).toEqual([
      { source: 'artifact', source_name: `thread/${T1}/artifact/art-big`, error_code: 'HTTP_BAD_RESPONSE' },
    ]);
  });

  it('when the thread list shows more messages than stored, then a done thread is queued again', async () => {
    threads.set(T1, { name: 'n', history: [msg(0)] });
    const { ops } = await setup([T1]);
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    threads.get(T1)!.history.push(msg(1));
    threads.set(T2, { name: 'other', history: [] });
    await sql`insert into threads (thread_id, enrich_status) values (${T2}, 'pending')`.execute(db());
    await ops.enrichThreads({ threadIds: [T2], loadId: 'L2' });
    expect(await ops.listPendingThreads({ afterThreadId: null, limit: 10 })).toEqual([T1]);
    // The thread list also renamed nothing wrongly and left the other thread done.
    const rows = await db()
      .selectFrom('threads')
      .select(['thread_id', 'enrich_status', 'thread_name'])
      .orderBy('thread_id')
      .execute();
    expect(rows).toEqual([
      { thread_id: T1, enrich_status: 'pending', thread_name: 'n' },
      { thread_id: T2, enrich_status: 'done', thread_name: 'other' },
    ]);
  });

  it('when the service answers 404 or 403 for a thread, then it is marked deleted or forbidden and the batch succeeds', async () => {
    threads.set(T1, { name: 'gone', history: [], status: 404 });
    threads.set(T2, { name: 'private', history: [], status: 403 });
    threads.set(T3, { name: 'fine', history: [msg(0)] });
    const { ops } = await setup([T1, T2, T3]);
    const counts = await ops.enrichThreads({ threadIds: [T1, T2, T3], loadId: 'L1' });
    expect(counts).toMatchObject({ threads: 3, done: 1, deleted: 1, forbidden: 1, failed: 0 });
    const rows = await db()
      .selectFrom('threads')
      .select(['thread_id', 'enrich_status'])
      .orderBy('thread_id')
      .execute();
    expect(rows.map((r) => r.enrich_status)).toEqual(['deleted', 'forbidden', 'done']);
  });

  it('when entries or artifacts break the contract, then they are quarantined and the rest of the thread loads', async () => {
    artifacts.set('bad-art', {
      output_type: 7,
      title: 'x',
      citations: [],
      val: 'v',
      resolved_text_objects: true,
    });
    // Text PostgreSQL cannot store: a lone surrogate in an artifact's title, and one escaped
    // inside `val` (the text is storable, its parsed JSON is not).
    artifacts.set('odd-art', {
      output_type: 'text',
      title: 'x\udbff',
      citations: [],
      val: 'v',
      resolved_text_objects: true,
    });
    artifacts.set('val-art', {
      output_type: 'table',
      title: 't',
      citations: [],
      val: '{"a":"\\ud800"}',
      resolved_text_objects: true,
    });
    threads.set(T1, {
      name: 'n\ud800\u0000',
      history: [
        msg(0),
        { message_id: 'not-a-uuid', citations: [] },
        msg(2, { citations: [citation(1, { inline_offset: 'three' })] }),
        'just a string',
        msg(4, { artifact_ids: ['bad-art', 'missing-art'] }),
        msg(5, { created_at: '2026-01-01 10:00' }),
        msg(6, { content: 'a\u0000b' }),
        msg(7, { content: 'a\ud800b' }),
        msg(8, { content: 'a pair \ud83d\ude00 is one character', artifact_ids: ['odd-art', 'val-art'] }),
        msg(9, { 'key\udfff': 'x' }),
      ],
    });
    const { ops } = await setup([T1]);
    const counts = await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    expect(counts).toMatchObject({ done: 1, messages: 3, artifacts: 1 });
    const rj = await db()
      .selectFrom('rejected_records')
      .select(['source', 'line_no', 'error_code', 'thread_id', 'source_name'])
      .orderBy('source')
      .orderBy('line_no')
      .orderBy('error_code')
      .execute();
    expect(rj.map((r) => [r.source, r.line_no, r.error_code])).toEqual([
      ['artifact', 4, 'HTTP_NOT_FOUND'],
      ['artifact', 4, 'artifact_invalid'],
      ['artifact', 8, 'artifact_lone_surrogate'],
      ['history', 1, 'history_invalid_message_id'],
      ['history', 2, 'history_invalid_citation'],
      ['history', 3, 'history_not_object'],
      ['history', 5, 'history_invalid_time'],
      ['history', 6, 'history_nul_character'],
      ['history', 7, 'history_lone_surrogate'],
      ['history', 9, 'history_lone_surrogate'],
    ]);
    expect(rj.every((r) => r.thread_id === T1)).toBe(true);
    const t = await db().selectFrom('threads').selectAll().executeTakeFirstOrThrow();
    // A name is not a record to quarantine: what PostgreSQL cannot store becomes U+FFFD.
    expect(t).toMatchObject({ enrich_status: 'done', history_count: 10, thread_name: 'n\ufffd\ufffd' });
    const kept = await db()
      .selectFrom('thread_messages')
      .select(['position', 'text'])
      .where('position', '=', 8)
      .executeTakeFirstOrThrow();
    expect(kept.text).toBe('a pair \ud83d\ude00 is one character');
    const art = await db()
      .selectFrom('artifacts')
      .select(['artifact_id', 'val', 'val_json'])
      .executeTakeFirstOrThrow();
    expect(art).toEqual({ artifact_id: 'val-art', val: '{"a":"\\ud800"}', val_json: null });
  });

  it('when a citation offset is beyond what the warehouse can store, then the entry is quarantined and the rest loads', async () => {
    threads.set(T1, {
      name: 'n',
      history: [msg(0), msg(1, { citations: [citation(1, { inline_offset: 2 ** 31 })] }), msg(2)],
    });
    const { ops } = await setup([T1]);
    const counts = await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    expect(counts).toMatchObject({ done: 1, messages: 2 });
    const rj = await db().selectFrom('rejected_records').select(['line_no', 'error_code']).execute();
    expect(rj).toEqual([{ line_no: 1, error_code: 'history_invalid_citation' }]);
  });

  it('when a page repeats a message id or names an artifact twice, then the repeat is quarantined and the page loads', async () => {
    artifacts.set('shared', {
      output_type: 'text',
      title: '',
      citations: [],
      val: 'v',
      resolved_text_objects: true,
    });
    threads.set(T1, {
      name: 'n',
      history: [msg(0, { artifact_ids: ['shared'] }), msg(0), msg(2, { artifact_ids: ['shared', 'shared'] })],
    });
    const { ops, srv } = await setup([T1], { pageSize: 5 });
    const counts = await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    expect(counts).toMatchObject({ done: 1, messages: 2, artifacts: 1 });
    const rj = await db().selectFrom('rejected_records').select(['line_no', 'error_code']).execute();
    expect(rj).toEqual([{ line_no: 1, error_code: 'history_duplicate_message_id' }]);
    expect(srv.seen.filter((s) => s.path.includes('/artifacts/'))).toHaveLength(1);
  });

  it('when a page is read again after a retry, then rejects and citations are not duplicated', async () => {
    threads.set(T1, { name: 'n', history: [msg(0, { citations: [citation(1)] }), { message_id: 'x' }] });
    const { ops } = await setup([T1]);
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    await sql`update threads set history_count = 0, enrich_status = 'pending'`.execute(db());
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    const n = async (t: 'citations' | 'rejected_records' | 'thread_messages') =>
      Number((await sql<{ n: string }>`select count(*) n from ${sql.table(t)}`.execute(db())).rows[0]?.n);
    expect([await n('citations'), await n('rejected_records'), await n('thread_messages')]).toEqual([
      1, 1, 1,
    ]);
  });

  it('when a message or an artifact is read again with fewer citations, then the ones beyond are removed', async () => {
    const art = (n: number) => ({
      output_type: 'text',
      title: 't',
      citations: Array.from({ length: n }, (_, i) => citation(10 + i)),
      val: 'v',
      resolved_text_objects: false,
    });
    artifacts.set('art-1', art(3));
    threads.set(T1, {
      name: 'n',
      history: [msg(0, { citations: [citation(1), citation(2), citation(3)], artifact_ids: ['art-1'] })],
    });
    const { ops } = await setup([T1]);
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    artifacts.set('art-1', art(1));
    threads.get(T1)!.history[0] = msg(0, { citations: [citation(4)], artifact_ids: ['art-1'] });
    await sql`update threads set history_count = 0, enrich_status = 'pending'`.execute(db());
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L2' });
    const cs = await db()
      .selectFrom('citations')
      .select(['owner_kind', 'ordinal', 'citation_id', '_load_id'])
      .orderBy('owner_kind')
      .orderBy('ordinal')
      .execute();
    expect(cs).toEqual([
      { owner_kind: 'artifact', ordinal: 0, citation_id: 'c10', _load_id: 'L2' },
      { owner_kind: 'message', ordinal: 0, citation_id: 'c4', _load_id: 'L2' },
    ]);
  });

  it('when v2 does not have an artifact but the legacy path does, then it is stored fetched_via legacy', async () => {
    artifacts.set('old-art', 'legacy');
    threads.set(T1, { name: 'n', history: [msg(0, { artifact_ids: ['old-art'] })] });
    const { ops } = await setup([T1]);
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    const a = await db().selectFrom('artifacts').selectAll().executeTakeFirstOrThrow();
    expect(a).toMatchObject({ artifact_id: 'old-art', fetched_via: 'legacy', val: 'legacy' });
  });

  // A 401 after the token refresh is the credentials' failure, not the thread's: like a 5xx, the
  // thread stays pending (an attempt used), under a code Temporal retries (HTTP_UNAUTHORIZED is on
  // its non-retryable list).
  for (const status of [503, 401]) {
    it(`when a thread keeps failing with ${status}, then it stays pending and the batch throws retryable, until it is marked failed`, async () => {
      threads.set(T1, { name: 'n', history: [], status });
      threads.set(T2, { name: 'ok', history: [msg(0)] });
      const { ops } = await setup([T1, T2], { maxRetries: 0 });
      for (let attempt = 1; attempt <= 2; attempt++) {
        const err = await ops.enrichThreads({ threadIds: [T1, T2], loadId: 'L1' }).catch((e: unknown) => e);
        expect(err).toMatchObject({ code: 'HTTP_SERVER', retryable: true });
        if (status === 401) expect(String((err as Error).message)).toContain('401');
        const t = await db()
          .selectFrom('threads')
          .selectAll()
          .where('thread_id', '=', T1)
          .executeTakeFirstOrThrow();
        expect(t).toMatchObject({ enrich_status: 'pending', enrich_attempts: attempt });
        expect(t.last_error).toContain(`listMessages failed: HTTP ${status}`);
      }
      const counts = await ops.enrichThreads({ threadIds: [T1, T2], loadId: 'L1' });
      expect(counts).toMatchObject({ failed: 1, done: 1 });
      const t = await db()
        .selectFrom('threads')
        .select('enrich_status')
        .where('thread_id', '=', T1)
        .executeTakeFirstOrThrow();
      expect(t.enrich_status).toBe('failed');
    });
  }

  it('when a thread stays throttled (429), then it stays pending without using up its attempts', async () => {
    threads.set(T1, { name: 'n', history: [], status: 429 });
    const { ops } = await setup([T1], { maxRetries: 0 });
    for (let i = 0; i < 4; i++) {
      await expect(ops.enrichThreads({ threadIds: [T1], loadId: 'L1' })).rejects.toMatchObject({
        code: 'HTTP_THROTTLED',
        retryable: true,
      });
    }
    const t = await db().selectFrom('threads').selectAll().executeTakeFirstOrThrow();
    expect(t).toMatchObject({ enrich_status: 'pending', enrich_attempts: 0 });
    expect(t.last_error).toContain('HTTP 429');
  });

  it('when the thread is queued again while it is being enriched, then it stays pending', async () => {
    threads.set(T1, { name: 'n', history: [msg(0), msg(1), msg(2)] });
    server = await startScriptedServer(async (req, res) => {
      if (req.path.endsWith('/messages')) {
        await sql`update threads set enrich_requested_at = now() + interval '1 second'`.execute(db());
      }
      handle(req, res);
    });
    const { log } = captureLog();
    const api = createServiceClient(options(server.url), log);
    await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${T1}, 'pending', now())`.execute(
      db(),
    );
    const ops = createEnrichOps({ db: db(), pool: tw.w.pool, api, log, concurrency: 1, threadListTtlMs: 0 });
    await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    const t = await db().selectFrom('threads').selectAll().executeTakeFirstOrThrow();
    expect(t).toMatchObject({ enrich_status: 'pending', history_count: 3 });
  });

  it('when the thread list is unavailable, then threads are still enriched (names unknown)', async () => {
    listStatus = 500;
    threads.set(T1, { name: 'n', history: [msg(0)] });
    const { ops } = await setup([T1]);
    const counts = await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
    expect(counts.done).toBe(1);
    const t = await db().selectFrom('threads').selectAll().executeTakeFirstOrThrow();
    expect(t.thread_name).toBeNull();
  });

  it('when the thread list cannot be read, then enrichment goes on, `crs-sync status` counts the failed reads and the enrichment_stalled alert opens; a read that works ends both', async () => {
    listStatus = 500;
    threads.set(T1, { name: 'one', history: [msg(0)] });
    threads.set(T2, { name: 'two', history: [msg(0, { message_id: uuid(20) })] });
    threads.set(T3, { name: 'three', history: [msg(0, { message_id: uuid(30) })] });
    const { ops } = await setup([T1], { maxRetries: 0 });
    expect((await ops.enrichThreads({ threadIds: [T1], loadId: 'L1' })).done).toBe(1);
    await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${T2}, 'pending', now())`.execute(
      db(),
    );
    expect((await ops.enrichThreads({ threadIds: [T2], loadId: 'L1' })).done).toBe(1);

    const failing = JSON.parse(cli(['status', '--json'])).threadList;
    expect(failing).toMatchObject({ failing: true, failures: 2, failuresTotal: 2, lastOkAt: null });
    expect(failing.lastError).toContain('listThreads failed: HTTP 500');
    expect(cli(['status'])).toMatch(
      /^thread list FAILING: 2 failed read\(s\) since .* UTC, last ok never; thread names are not updated/m,
    );
    cli(['alerts', 'check']);
    const open = alertsOf('enrichment_stalled:thread_list');
    expect(open).toEqual([expect.objectContaining({ kind: 'enrichment_stalled', resolvedAt: null })]);
    expect(open[0]?.summary).toContain('the thread list could not be read (2 failed read(s)');

    listStatus = 200;
    await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${T3}, 'pending', now())`.execute(
      db(),
    );
    expect((await ops.enrichThreads({ threadIds: [T3], loadId: 'L1' })).done).toBe(1);
    const names = await db()
      .selectFrom('threads')
      .select(['thread_id', 'thread_name'])
      .orderBy('thread_id')
      .execute();
    expect(names.map((t) => t.thread_name)).toEqual(['one', 'two', 'three']);
    expect(JSON.parse(cli(['status', '--json'])).threadList).toMatchObject({
      failing: false,
      failures: 0,
      failuresTotal: 2,
      failingSince: null,
    });
    expect(cli(['status'])).toMatch(/^thread list read ok .* UTC \(2 failed read\(s\) before\)$/m);
    cli(['alerts', 'check']);
    expect(alertsOf('enrichment_stalled:thread_list')).toEqual([
      expect.objectContaining({ resolvedAt: expect.any(String) }),
    ]);
  });

  it('when the service echoes credentials in error bodies, then no secret reaches a stored row', async () => {
    threads.set(T1, { name: 'n', history: [], status: 403 });
    threads.set(T2, { name: 'n', history: [msg(0, { artifact_ids: ['echo-art'] })] });
    server = await startScriptedServer((req, res) => {
      if (/artifacts|artifact\//.test(req.path) || req.path.endsWith(`${T1}/messages`)) {
        const status = req.path.endsWith('/messages') ? 403 : 404;
        return sendJson(res, status, {
          detail: `bad credentials ${req.headers.authorization} ${req.headers['x-api-key']}`,
        });
      }
      handle(req, res);
    });
    const { log } = captureLog();
    const api = createServiceClient(
      options(server.url, { legacyBaseUrl: `${server.url}/legacy`, apiKey: SECRETS.apiKey }),
      log,
    );
    for (const id of [T1, T2]) {
      await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${id}, 'pending', now())`.execute(
        db(),
      );
    }
    const ops = createEnrichOps({ db: db(), pool: tw.w.pool, api, log, concurrency: 2, threadListTtlMs: 0 });
    await ops.enrichThreads({ threadIds: [T1, T2], loadId: 'L1' });
    const stored = JSON.stringify([
      await db().selectFrom('threads').selectAll().execute(),
      await db().selectFrom('rejected_records').selectAll().execute(),
    ]);
    expect(stored).toContain('bad credentials');
    for (const secret of Object.values(SECRETS)) expect(stored).not.toContain(secret);
  });
});
