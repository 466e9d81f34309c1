import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncWindow } from '../../workflows/index.ts';
import { SECRETS } from '../api/helpers/client-setup.ts';
import { type ScriptedServer, startScriptedServer } from '../api/helpers/scripted-server.ts';
import { DAY, day, EXPECTED_REJECTS } from '../helpers/long-key-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { connectHarness, createTestWorker, type TemporalHarness } from './harness.ts';

// A sync through Temporal of a day whose export holds keys no index can hold (a key of 1 MB, of
// 10,000 characters, of 1,024 CJK characters, a line of 10,001 keys): the day workflow's load
// quarantines those lines and loads the rest, and the day and the run end complete, on the first
// attempt. Before, the drift path of such a key failed the load on every retry
// (`index row size … exceeds btree version 4 maximum 2704 for index "schema_drift_pkey"`).
describe('a sync of a day with keys no index can hold', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let server: ScriptedServer;
  let exports = 0;

  beforeAll(async () => {
    h = await connectHarness('operator');
    tw = await createTestWarehouse({ prefix: 'tlongkeys' });
    const { lines } = day();
    const body = Buffer.from(`${lines.join('\n')}\n`);
    server = await startScriptedServer((_req, res) => {
      exports++;
      res.writeHead(200, { 'content-type': 'application/x-ndjson', 'content-length': String(body.length) });
      res.end(body);
    });
  });
  afterAll(async () => {
    await server?.close();
    await tw?.dispose();
    await h?.close();
  });

  it('when the day is synced, then its long-key lines are quarantined, the rest loads, and the day and the run complete on the first attempt', async () => {
    const { recs } = day();
    const worker = await createTestWorker(h, {
      warehouse: tw.w,
      env: {
        CRS_BASE_URL: server.url,
        CRS_SERVICE_ACCOUNT_TOKEN: SECRETS.serviceAccountToken,
        CRS_BATCH_SIZE: '4',
      },
    });
    const result = await worker.runUntil(async () => {
      const run = await h.client.workflow.start(syncWindow, {
        taskQueue: h.taskQueue,
        workflowId: `long-keys-${h.taskQueue}`,
        args: [{ kind: 'manual', from: DAY, to: DAY, concurrency: 1, enrich: false }],
      });
      return run.result();
    });
    expect(result).toMatchObject({ failedDays: [], totals: { daysFailed: 0, inserted: 10, rejected: 6 } });
    expect(exports).toBe(1);
    const ledger = await tw.w.pool.query(
      'select status, attempt, attempts, rows_rejected, rows_inserted from sync_days where day = $1',
      [DAY],
    );
    expect(ledger.rows).toEqual([
      { status: 'complete', attempt: 1, attempts: 1, rows_rejected: 6, rows_inserted: 10 },
    ]);
    const rejects = await tw.w.pool.query<{ line_no: string; error_code: string }>(
      'select line_no, error_code from rejected_records order by line_no',
    );
    expect(rejects.rows.map((r) => [Number(r.line_no), r.error_code])).toEqual(EXPECTED_REJECTS);
    const loaded = await tw.w.pool.query<{ message_id: string }>(
      'select message_id::text from analytics_messages where _deleted_at is null order by message_id',
    );
    expect(loaded.rows.map((r) => r.message_id)).toEqual(
      [...recs.slice(0, 8), recs[13], recs[14]].map((r) => r?.['Message ID']).sort(),
    );
  }, 180_000);
});
