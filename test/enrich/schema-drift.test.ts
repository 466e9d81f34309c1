import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { captureLog, simulatorOptions } from '../api/helpers/client-setup.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Schema drift of the thread API: the simulator over HTTP told to add a field to every history
 * entry, artifact and thread-list entry (fault `new-field`), enrichment into a real Postgres
 * schema, and the real CLI listing what it noticed.
 */
const root = path.resolve(import.meta.dirname, '..', '..');
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

function changes(): DriftJson[] {
  const r = spawnSync(process.execPath, [path.join(root, 'bin/crs-sync.js'), 'schema', 'changes', '--json'], {
    env: { ...process.env, LOG_LEVEL: 'silent', DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema },
    encoding: 'utf8',
    cwd: mkdtempSync(path.join(tmpdir(), 'crs-drift-')),
  });
  expect(r.status).toBe(0);
  return r.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as DriftJson);
}

async function enrichAll(loadId: string): Promise<void> {
  const { log } = captureLog();
  const api = createServiceClient(simulatorOptions(sim), log);
  const ops = createEnrichOps({ db: tw.w.db, pool: tw.w.pool, api, log, concurrency: 4, pageSize: 5 });
  let after: string | null = null;
  for (;;) {
    const ids = await ops.listPendingThreads({ afterThreadId: after, limit: 10 });
    if (ids.length === 0) break;
    await ops.enrichThreads({ threadIds: ids, loadId });
    after = ids.at(-1) ?? null;
  }
}

describe('schema drift of the thread API', () => {
  it('when history entries, artifacts and the thread list carry a new field, then `schema changes` lists it once per source with one count per entity, and enriching again does not add to it', async () => {
    const readable = sim.truth
      .threads()
      .map((t) => t.thread_id)
      .filter((id) => !sim.truth.isDeleted(id) && !sim.truth.isRestricted(id))
      .slice(0, 6);
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
});
