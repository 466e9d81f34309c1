import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toFailure } from '../../activities/failures.ts';
import { createServiceClient } from '../../src/api/index.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { CrsError } from '../../src/errors.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { openWarehouse, type Warehouse } from '../../src/warehouse/db.ts';
import { captureLog, simulatorOptions } from '../api/helpers/client-setup.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * An enrichment batch whose warehouse connections are terminated while it writes (a failover in
 * the middle of a batch), against the real simulator over HTTP and a real Postgres: the batch
 * fails retryably, nothing crashes, and running it again stores exactly the service's histories.
 */
let sim: Simulator;
let tw: TestWarehouse;
let w: Warehouse;
const APP = `crs-enr-dbf-${randomBytes(3).toString('hex')}`;

beforeAll(async () => {
  sim = await startSimulator({ seed: 11, days: 1, recordsPerDay: 30, now: runningClock(PINNED) });
  tw = await createTestWarehouse({ prefix: 'enrdbf' });
  w = openWarehouse({ url: tw.url, schema: tw.schema, max: 6, applicationName: APP });
});
afterAll(async () => {
  await w?.close();
  await sim?.close();
  await tw?.dispose();
});

function ops() {
  const { log } = captureLog();
  const api = createServiceClient(simulatorOptions(sim), log);
  return createEnrichOps({ db: w.db, pool: w.pool, api, log, concurrency: 4, pageSize: 5 });
}

async function pendingIds(): Promise<string[]> {
  const r = await sql<{ thread_id: string }>`
    select thread_id from threads where enrich_status = 'pending' order by thread_id`.execute(tw.w.db);
  return r.rows.map((x) => x.thread_id);
}

describe('enrichment under database faults', () => {
  it("when the batch's connections are terminated while a page write is in flight, then the batch fails retryably and, run again, stores exactly the service's histories", async () => {
    const all = sim.truth.threads().map((t) => t.thread_id);
    for (const id of all) {
      await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${id}, 'pending', now())`.execute(
        tw.w.db,
      );
    }
    // Only page writes touch citations: they queue behind this lock, so the termination finds one
    // in flight.
    const holder = await tw.w.pool.connect();
    let batch: Promise<unknown> = Promise.resolve();
    try {
      await holder.query('begin');
      await holder.query('lock table citations in access exclusive mode');
      batch = ops()
        .enrichThreads({ threadIds: all, loadId: 'enr-dbf' })
        .catch((e: unknown) => e);
      let settled = false;
      void batch.then(() => {
        settled = true;
      });
      for (;;) {
        if (settled) throw new Error(`the batch ended before any page write waited: ${String(await batch)}`);
        const waiting = await tw.w.pool.query<{ n: number }>(
          `select count(*)::int n from pg_stat_activity where application_name = $1 and wait_event_type = 'Lock'`,
          [APP],
        );
        if ((waiting.rows[0]?.n ?? 0) > 0) break;
        await sleep(10);
      }
      const killed = await tw.w.pool.query<{ n: number }>(
        'select count(pg_terminate_backend(pid))::int n from pg_stat_activity where application_name = $1',
        [APP],
      );
      expect(killed.rows[0]?.n).toBeGreaterThan(0);
    } finally {
      // The batch's other writes (on new connections) must not wait for this lock forever.
      await holder.query('rollback');
      holder.release();
    }
    const err = await batch;
    expect(err).toBeInstanceOf(CrsError);
    expect(err).toMatchObject({ code: 'DB_UNAVAILABLE', retryable: true });
    expect(toFailure(err)).toMatchObject({ type: 'DB_UNAVAILABLE', nonRetryable: false });
    expect((await pendingIds()).length).toBeGreaterThan(0);

    // Temporal's retry: the same batch again, on the same pool.
    await ops().enrichThreads({ threadIds: await pendingIds(), loadId: 'enr-dbf' });
    expect(await pendingIds()).toEqual([]);
    const readable = all.filter((id) => !sim.truth.isRestricted(id));
    const stored = await sql<{ thread_id: string; position: number; message_id: string; raw: unknown }>`
      select thread_id, position, message_id, raw from thread_messages order by thread_id, position`.execute(
      tw.w.db,
    );
    const expected = [...readable].sort().flatMap((id) =>
      sim.truth.threadHistory(id)!.map((e, position) => ({
        thread_id: id,
        position,
        message_id: e.message_id,
        raw: e,
      })),
    );
    expect(stored.rows).toEqual(expected);
  });
});
