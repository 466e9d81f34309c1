import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { captureLog, simulatorOptions } from '../api/helpers/client-setup.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Enrichment of every thread of a simulated service, over HTTP with faults on, into a real
 * Postgres schema; the warehouse is compared with the simulator's ground truth.
 */
let sim: Simulator;
let tw: TestWarehouse;

beforeAll(async () => {
  sim = await startSimulator({
    seed: 5,
    days: 2,
    recordsPerDay: 40,
    faults: '429=0.05:1s,5xx=0.05:2,expire=0.02',
    now: runningClock(PINNED),
  });
  tw = await createTestWarehouse({ prefix: 'enrsim' });
  // The seed decides the data and, with each request's URL, which fault it meets: enough to replay a failure.
  console.info(`enrichment against the simulator: seed ${sim.seed}, faults ${JSON.stringify(sim.faults())}`);
});
afterAll(async () => {
  await sim?.close();
  await tw?.dispose();
});

/** Spec §2 citation fields: the warehouse has a column for each; anything else goes to `extra`. */
const CITATION_FIELDS = [
  'id',
  'internal_id',
  'citation_type',
  'name',
  'inline_offset',
  'summary',
  'last_updated_at',
  'is_snippet',
];

function client() {
  const { log } = captureLog();
  const api = createServiceClient(simulatorOptions(sim), log);
  return createEnrichOps({ db: tw.w.db, pool: tw.w.pool, api, log, concurrency: 4, pageSize: 5 });
}

/** Every pending thread, in pages of 10, as the enrichPending workflow walks them. */
async function enrichAll(ops: ReturnType<typeof createEnrichOps>, loadId: string): Promise<void> {
  let after: string | null = null;
  for (;;) {
    const ids = await ops.listPendingThreads({ afterThreadId: after, limit: 10 });
    if (ids.length === 0) break;
    await ops.enrichThreads({ threadIds: ids, loadId });
    after = ids[ids.length - 1]!;
  }
}

/** What a second run could change: every stored row's version and content, and the statuses. */
async function snapshot() {
  const q = async (text: string) => (await sql.raw<Record<string, unknown>>(text).execute(tw.w.db)).rows;
  return {
    messages: await q(
      'select xmin::text, message_id, position, raw from thread_messages order by message_id',
    ),
    citations: await q(
      'select xmin::text, owner_kind, owner_id, ordinal, extra from citations order by owner_kind, owner_id, ordinal',
    ),
    artifacts: await q('select xmin::text, artifact_id, raw from artifacts order by thread_id, artifact_id'),
    threads: await q(
      'select thread_id, enrich_status, thread_name, history_count from threads order by thread_id',
    ),
    rejected: await q('select count(*)::int as n from rejected_records'),
  };
}

/**
 * The warehouse holds exactly what the service has for `readable` threads, row by row: every
 * message (thread, position, entry as sent), every artifact (named by the first entry of its
 * thread that names it) and every citation of both, and no other.
 */
async function expectWarehouseIsTruth(readable: string[]) {
  const histories = readable.map((id) => sim.truth.threadHistory(id)!);
  const db = tw.w.db;
  const count = async (q: string) => Number((await sql.raw<{ n: string }>(q).execute(db)).rows[0]?.n);
  expect(await count('select count(*) n from thread_messages where is_cancelled')).toBe(
    histories.flat().filter((e) => e.content === 'User cancelled').length,
  );
  expect(await count('select count(*) n from rejected_records')).toBe(0);

  // Every message, row by row: its thread, position and the entry exactly as the service has it.
  const byKey = <T extends Record<string, unknown>>(rows: T[], key: (r: T) => string) =>
    [...rows].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  const messages = await db
    .selectFrom('thread_messages')
    .select(['thread_id', 'position', 'message_id', 'raw'])
    .execute();
  const expectedMessages = readable.flatMap((id) =>
    sim.truth.threadHistory(id)!.map((e, position) => ({
      thread_id: id,
      position,
      message_id: e.message_id,
      raw: e,
    })),
  );
  const messageKey = (r: { thread_id: string; position: number }) =>
    `${r.thread_id}/${String(r.position).padStart(6, '0')}`;
  expect(byKey(messages, messageKey)).toEqual(byKey(expectedMessages, messageKey));

  // Every artifact, row by row, named by the first entry of its thread that names it.
  const expectedArtifacts = readable.flatMap((id) => {
    const firstNamer = new Map<string, string>();
    for (const e of sim.truth.threadHistory(id)!) {
      for (const a of e.artifact_ids) if (!firstNamer.has(a)) firstNamer.set(a, e.message_id);
    }
    return [...firstNamer].map(([artifactId, messageId]) => {
      const a = sim.truth.artifact(id, artifactId)!.artifact;
      return {
        thread_id: id,
        artifact_id: artifactId,
        message_id: messageId,
        output_type: a.output_type,
        title: a.title,
        val: a.val,
        raw: a,
        fetched_via: 'v2',
      };
    });
  });
  const artifacts = await db
    .selectFrom('artifacts')
    .select(['thread_id', 'artifact_id', 'message_id', 'output_type', 'title', 'val', 'raw', 'fetched_via'])
    .execute();
  const artifactKey = (r: { thread_id: string; artifact_id: string }) => `${r.thread_id}/${r.artifact_id}`;
  expect(byKey(artifacts, artifactKey)).toEqual(byKey(expectedArtifacts, artifactKey));

  // Every citation of a message and of an artifact, row by row, in its owner's order.
  const citationRow = (kind: 'message' | 'artifact', ownerId: string, ordinal: number, c: object) => {
    const o = c as Record<string, unknown>;
    const extra = Object.fromEntries(Object.entries(o).filter(([k]) => !CITATION_FIELDS.includes(k)));
    return {
      owner_kind: kind,
      owner_id: ownerId,
      ordinal,
      citation_id: o.id,
      citation_type: o.citation_type,
      name: o.name,
      inline_offset: o.inline_offset,
      is_snippet: o.is_snippet,
      extra: Object.keys(extra).length > 0 ? extra : null,
    };
  };
  const expectedCitations = [
    ...histories.flat().flatMap((e) => e.citations.map((c, i) => citationRow('message', e.message_id, i, c))),
    ...expectedArtifacts.flatMap((a) =>
      a.raw.citations.map((c, i) => citationRow('artifact', a.artifact_id, i, c)),
    ),
  ];
  const citations = await db
    .selectFrom('citations')
    .select([
      'owner_kind',
      'owner_id',
      'ordinal',
      'citation_id',
      'citation_type',
      'name',
      'inline_offset',
      'is_snippet',
      'extra',
    ])
    .execute();
  const citationKey = (r: { owner_kind: string; owner_id: string; ordinal: number }) =>
    `${r.owner_kind}/${r.owner_id}/${String(r.ordinal).padStart(6, '0')}`;
  expect(citations.length).toBeGreaterThan(0);
  expect(byKey(citations, citationKey)).toEqual(byKey(expectedCitations, citationKey));
}

describe('enrichment against the simulator', () => {
  let all: string[];
  let deleted: string;
  let readable: string[];

  it('when every thread is enriched through faults, then the warehouse holds exactly the service’s histories and artifacts', async () => {
    all = sim.truth.threads().map((t) => t.thread_id);
    deleted = all.find((id) => !sim.truth.isRestricted(id))!;
    for (const id of all) {
      await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${id}, 'pending', now())`.execute(
        tw.w.db,
      );
    }
    sim.dataset.deleteById(deleted);
    await enrichAll(client(), 'sim-1');

    readable = all.filter((id) => id !== deleted && !sim.truth.isRestricted(id));
    const db = tw.w.db;
    const status = await db
      .selectFrom('threads')
      .select(['thread_id', 'enrich_status', 'thread_name'])
      .execute();
    const by = new Map(status.map((s) => [s.thread_id, s]));
    expect(by.get(deleted)?.enrich_status).toBe('deleted');
    const restricted = all.filter((x) => sim.truth.isRestricted(x));
    expect(restricted.length).toBeGreaterThan(0);
    for (const id of restricted) expect(by.get(id)?.enrich_status).toBe('forbidden');
    for (const id of readable) expect(by.get(id)?.enrich_status).toBe('done');
    const names = new Map(sim.truth.threads().map((t) => [t.thread_id, t.thread_name]));
    for (const id of readable) expect(by.get(id)?.thread_name).toBe(names.get(id));

    await expectWarehouseIsTruth(readable);
  });

  it('when every thread is queued and enriched again through faults, then no stored row is rewritten', async () => {
    const before = await snapshot();
    expect(before.messages.length).toBeGreaterThan(0);
    // As a re-load of the export would: every thread it touches is queued again.
    await sql`update threads set enrich_status = 'pending', enrich_requested_at = now()
              where thread_id <> ${deleted}`.execute(tw.w.db);
    await enrichAll(client(), 'sim-2');
    expect(await snapshot()).toEqual(before);
  });

  it('when histories shrink or are rewritten upstream, then they are read again and the warehouse equals the service row by row', async () => {
    const long = readable.filter((id) => sim.truth.threadHistory(id)!.length >= 4);
    expect(long.length).toBeGreaterThanOrEqual(5);
    const [middle, renamedLast, tail, first, mixed] = long as [string, string, string, string, string];
    const n = (id: string) => sim.truth.threadHistory(id)!.length;
    sim.dataset.editHistory(middle, { remove: [1] });
    sim.dataset.editHistory(renamedLast, { rename: [n(renamedLast) - 1] });
    sim.dataset.editHistory(tail, { remove: [n(tail) - 2, n(tail) - 1] });
    sim.dataset.editHistory(first, { remove: [0] });
    sim.dataset.editHistory(mixed, { rename: [0], remove: [n(mixed) - 1] });
    // A rewrite that keeps the length shows in no count: a load that touches the thread queues it.
    await sql`update threads set enrich_status = 'pending', enrich_requested_at = now()
              where thread_id = ${renamedLast}`.execute(tw.w.db);
    // The shortened ones are queued by the thread list the batches read (their count shrank);
    // those the walk had passed are enriched by the next walk.
    await enrichAll(client(), 'sim-3');
    await enrichAll(client(), 'sim-3b');
    const status = await tw.w.db.selectFrom('threads').select(['thread_id', 'enrich_status']).execute();
    for (const id of readable) expect(status.find((s) => s.thread_id === id)?.enrich_status).toBe('done');
    await expectWarehouseIsTruth(readable);
  });
});
