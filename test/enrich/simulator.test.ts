import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { captureLog } from '../api/helpers/client-setup.ts';
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
  });
  tw = await createTestWarehouse({ prefix: 'enrsim' });
});
afterAll(async () => {
  await sim?.close();
  await tw?.dispose();
});

describe('enrichment against the simulator', () => {
  it('when every thread is enriched through faults, then the warehouse holds exactly the service’s histories and artifacts', async () => {
    const { log } = captureLog();
    const api = createServiceClient(
      {
        baseUrl: sim.baseUrl,
        legacyBaseUrl: sim.legacyBaseUrl,
        serviceAccountToken: sim.credentials.serviceAccountToken,
        accessToken: undefined,
        tokenUrl: sim.tokenUrl,
        clientId: sim.credentials.clientId,
        clientSecret: sim.credentials.clientSecret,
        apiKey: sim.credentials.apiKey,
        timeoutMs: 10_000,
        rateLimitRps: 500,
        concurrency: 8,
        maxRetries: 6,
        baseBackoffMs: 20,
        maxBackoffMs: 200,
      },
      log,
    );
    const all = sim.truth.threads().map((t) => t.thread_id);
    const deleted = all.find((id) => !sim.truth.isRestricted(id))!;
    for (const id of all) {
      await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${id}, 'pending', now())`.execute(
        tw.w.db,
      );
    }
    sim.dataset.deleteById(deleted);
    const ops = createEnrichOps({ db: tw.w.db, pool: tw.w.pool, api, log, concurrency: 4, pageSize: 5 });

    let after: string | null = null;
    for (;;) {
      const ids = await ops.listPendingThreads({ afterThreadId: after, limit: 10 });
      if (ids.length === 0) break;
      await ops.enrichThreads({ threadIds: ids, loadId: 'sim-1' });
      after = ids[ids.length - 1]!;
    }

    const readable = all.filter((id) => id !== deleted && !sim.truth.isRestricted(id));
    const histories = readable.map((id) => sim.truth.threadHistory(id)!);
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

    const count = async (q: string) => Number((await sql.raw<{ n: string }>(q).execute(db)).rows[0]?.n);
    expect(await count('select count(*) n from thread_messages')).toBe(
      histories.reduce((s, h) => s + h.length, 0),
    );
    expect(await count('select count(*) n from thread_messages where is_cancelled')).toBe(
      histories.flat().filter((e) => e.content === 'User cancelled').length,
    );
    expect(await count("select count(*) n from citations where owner_kind = 'message'")).toBe(
      histories.flat().reduce((s, e) => s + e.citations.length, 0),
    );
    const artifactIds = readable.flatMap((id) =>
      sim.truth.threadHistory(id)!.flatMap((e) => e.artifact_ids.map((a) => [id, a] as const)),
    );
    expect(await count('select count(*) n from artifacts')).toBe(artifactIds.length);
    expect(await count("select count(*) n from citations where owner_kind = 'artifact'")).toBe(
      artifactIds.reduce((s, [t, a]) => s + (sim.truth.artifact(t, a)?.artifact.citations.length ?? 0), 0),
    );
    expect(await count('select count(*) n from rejected_records')).toBe(0);
    // One thread, field by field:
    const sample = readable.find((id) =>
      sim.truth.threadHistory(id)!.some((e) => e.artifact_ids.length > 0),
    )!;
    const rows = await db
      .selectFrom('thread_messages')
      .select(['position', 'raw'])
      .where('thread_id', '=', sample)
      .orderBy('position')
      .execute();
    expect(rows.map((r) => r.raw)).toEqual(sim.truth.threadHistory(sample));
  });
});
