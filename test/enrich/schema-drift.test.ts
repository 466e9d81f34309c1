import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { captureLog, simulatorOptions } from '../api/helpers/client-setup.ts';
import { cliSync } from '../helpers/cli.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Schema drift of the thread API: the simulator over HTTP told to add a field to every history
 * entry, artifact and thread-list entry (fault `new-field`), enrichment into a real Postgres
 * schema, and the real CLI listing what it noticed.
 */
let sim: Simulator;
let tw: TestWarehouse;

beforeAll(async () => {
  sim = await startSimulator({
    seed: 9,
    days: 1,
    recordsPerDay: 12,
    faults: 'new-field=history+artifact+thread',
    now: runningClock(PINNED),
  });
  tw = await createTestWarehouse({ prefix: 'driftenr' });
});
afterAll(async () => {
  await sim?.close();
  await tw?.dispose();
});

interface DriftJson {
  source: string;
  path: string;
  kind: string;
  actual_type: string | null;
  example: string | null;
  first_day: string | null;
  count: number;
}

/** The real CLI against `on` (default: the first test's warehouse); exits 0 or the test fails. */
function cli(args: string[], on: TestWarehouse = tw, extra: Record<string, string> = {}): string {
  const r = cliSync(args, {
    env: { DATABASE_URL: on.url, CRS_SCHEMA: on.schema, ...extra },
    tmpPrefix: 'crs-drift-',
  });
  expect({ status: r.code, stderr: r.stderr }).toMatchObject({ status: 0 });
  return r.stdout;
}

function changes(): DriftJson[] {
  return cli(['schema', 'changes', '--json'])
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as DriftJson);
}

async function enrichAll(
  loadId: string,
  on: TestWarehouse = tw,
  schemaContract: 'evolve' | 'freeze' = 'evolve',
): Promise<void> {
  const { log } = captureLog();
  const api = createServiceClient(simulatorOptions(sim), log);
  const ops = createEnrichOps({
    db: on.w.db,
    pool: on.w.pool,
    api,
    log,
    concurrency: 4,
    pageSize: 5,
    schemaContract,
  });
  let after: string | null = null;
  for (;;) {
    const ids = await ops.listPendingThreads({ afterThreadId: after, limit: 10 });
    if (ids.length === 0) break;
    await ops.enrichThreads({ threadIds: ids, loadId });
    after = ids.at(-1) ?? null;
  }
}

function readableThreads(): string[] {
  return sim.truth
    .threads()
    .map((t) => t.thread_id)
    .filter((id) => !sim.truth.isDeleted(id) && !sim.truth.isRestricted(id))
    .slice(0, 6);
}

describe('schema drift of the thread API', () => {
  it('when history entries, artifacts and the thread list carry a new field, then `schema changes` lists it once per source with one count per entity, and enriching again does not add to it', async () => {
    const readable = readableThreads();
    for (const id of readable) {
      await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${id}, 'pending', now())`.execute(
        tw.w.db,
      );
    }
    await enrichAll('drift-1');

    const entries = readable.reduce((n, id) => n + (sim.truth.threadHistory(id)?.length ?? 0), 0);
    const artifacts = new Set(
      readable.flatMap((id) => (sim.truth.threadHistory(id) ?? []).flatMap((e) => e.artifact_ids)),
    ).size;
    expect(artifacts).toBeGreaterThan(0);
    const today = new Date().toISOString().slice(0, 10);
    const bySource = (list: DriftJson[]) =>
      Object.fromEntries(list.filter((d) => d.path === 'sim_new_field').map((d) => [d.source, d]));

    const first = bySource(changes());
    for (const source of ['history', 'artifact', 'thread']) {
      expect(first[source]).toMatchObject({
        kind: 'new_field',
        actual_type: 'string',
        example: '"added by the simulator"',
        first_day: today,
      });
    }
    expect(first.history?.count).toBe(entries);
    expect(first.artifact?.count).toBe(artifacts);
    expect(first.thread?.count).toBe(sim.truth.threads().length);
    // Nothing the simulator sends by default is drift.
    expect(changes().filter((d) => d.path !== 'sim_new_field')).toEqual([]);

    await sql`update threads set enrich_status = 'pending', enrich_requested_at = now(), history_count = 0`.execute(
      tw.w.db,
    );
    await enrichAll('drift-2');
    const again = bySource(changes());
    expect(again.history?.count).toBe(entries);
    expect(again.artifact?.count).toBe(artifacts);
  });

  it('when the contract is frozen, then drifted history entries and artifacts are quarantined as schema_drift and not stored, the rest of the thread loads, and after `schema accept` and `rejects replay` they load', async () => {
    const fz = await createTestWarehouse({ prefix: 'driftfrz' });
    try {
      const db = fz.w.db;
      const threads = readableThreads();
      for (const id of threads) {
        await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${id}, 'pending', now())`.execute(
          db,
        );
      }
      const history = new Map(threads.map((id) => [id, sim.truth.threadHistory(id) ?? []]));
      const entries = [...history.values()].reduce((n, h) => n + h.length, 0);
      const artifactIds = new Set([...history.values()].flatMap((h) => h.flatMap((e) => e.artifact_ids)));
      expect(entries).toBeGreaterThan(0);
      expect(artifactIds.size).toBeGreaterThan(0);
      const count = async (table: 'thread_messages' | 'artifacts') =>
        Number(
          (await sql<{ n: string }>`select count(*) as n from ${sql.table(table)}`.execute(db)).rows[0]?.n,
        );
      const open = (source: 'history' | 'artifact') =>
        db
          .selectFrom('rejected_records')
          .select(['thread_id', 'source_name', 'line_no', 'error_code', 'error_detail'])
          .where('source', '=', source)
          .where('replayed_at', 'is', null)
          .execute();
      const frozen = { CRS_RECORD_CONTRACT: 'freeze' };

      // Every entry carries the new field: none is stored, each is quarantined at its position.
      await enrichAll('freeze-1', fz, 'freeze');
      expect(await count('thread_messages')).toBe(0);
      const held = await open('history');
      expect(held).toHaveLength(entries);
      for (const r of held) {
        expect(r).toMatchObject({ error_code: 'schema_drift', source_name: `thread/${r.thread_id}` });
        expect(r.error_detail).toContain('CRS_RECORD_CONTRACT=freeze');
        expect(r.error_detail).toContain('new field "sim_new_field" (string)');
      }
      expect(held.map((r) => `${r.thread_id}#${r.line_no}`).sort()).toEqual(
        [...history].flatMap(([id, h]) => h.map((_, i) => `${id}#${i}`)).sort(),
      );
      // The drift is still recorded, so it can be accepted.
      const drift = await db.selectFrom('schema_drift').select(['source', 'path']).execute();
      expect(drift).toContainEqual({ source: 'history', path: 'sim_new_field' });

      // A replay before the field is accepted quarantines the entries again.
      cli(['rejects', 'replay', '--code', 'schema_drift'], fz, frozen);
      await enrichAll('freeze-2', fz, 'freeze');
      expect(await count('thread_messages')).toBe(0);
      expect(await open('history')).toHaveLength(entries);

      // History accepted: the entries load; the artifacts they name carry the field too and are
      // quarantined, while the rest of each thread loads.
      cli(['schema', 'accept', 'history', 'sim_new_field'], fz, frozen);
      cli(['rejects', 'replay', '--code', 'schema_drift'], fz, frozen);
      await enrichAll('freeze-3', fz, 'freeze');
      expect(await open('history')).toEqual([]);
      expect(await count('thread_messages')).toBe(entries);
      expect(await count('artifacts')).toBe(0);
      const artifactRejects = await open('artifact');
      expect(new Set(artifactRejects.map((r) => r.source_name))).toEqual(
        new Set(
          [...history].flatMap(([id, h]) =>
            h.flatMap((e) => e.artifact_ids.map((a) => `thread/${id}/artifact/${a}`)),
          ),
        ),
      );
      for (const r of artifactRejects) {
        expect(r.error_code).toBe('schema_drift');
        expect(r.error_detail).toContain('new field "sim_new_field" (string)');
      }
      const done = await db.selectFrom('threads').select('enrich_status').distinct().execute();
      expect(done).toEqual([{ enrich_status: 'done' }]);

      // Artifacts accepted: replayed, they load.
      cli(['schema', 'accept', 'artifact', 'sim_new_field'], fz, frozen);
      cli(['rejects', 'replay', '--code', 'schema_drift'], fz, frozen);
      await enrichAll('freeze-4', fz, 'freeze');
      expect(await open('artifact')).toEqual([]);
      expect(await count('artifacts')).toBe(artifactIds.size);
      expect(await count('thread_messages')).toBe(entries);
    } finally {
      await fz.dispose();
    }
  });
});
