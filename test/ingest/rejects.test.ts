import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { replayRejects } from '../../src/ingest/replay.ts';
import { createLogger } from '../../src/log.ts';
import { readStatus } from '../../src/warehouse/read/status.ts';
import { makeRecords } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

const log = createLogger({ level: 'silent', pretty: false });
const config = parseConfig({});

describe('rejects replay', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse();
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when a quarantined line is valid under the current parser, then replay loads it and marks it replayed; a still-bad one stays open with the new reason', async () => {
    const good = makeRecords(1, { seed: 'replay' })[0]!;
    // As if an older contract had rejected a valid line.
    await tw.w.db
      .insertInto('rejected_records')
      .values([
        {
          _load_id: 'old-load',
          source: 'export',
          source_name: 'export:2026-11-01',
          day: '2026-11-01',
          line_no: 7,
          raw: JSON.stringify(good),
          error_code: 'invalid_uuid',
          error_detail: 'stale rule',
        },
        {
          _load_id: 'old-load',
          source: 'export',
          source_name: 'export:2026-11-01',
          day: '2026-11-01',
          line_no: 8,
          raw: '{"still": "broken"',
          error_code: 'invalid_json',
          error_detail: 'truncated',
        },
      ])
      .execute();

    const r = await replayRejects(tw.w, config, log, { loadId: 'old-load' });
    expect(r).toMatchObject({ selected: 2, loaded: 1, stillRejected: 1 });
    const row = await tw.w.pool.query('select response from analytics_messages where message_id = $1', [
      good['Message ID'],
    ]);
    expect(row.rows).toEqual([{ response: good.Response }]);
    const rej = await tw.w.pool.query(
      'select line_no, replayed_at is not null as replayed, replay_result from rejected_records order by line_no',
    );
    expect(rej.rows.map((x) => [x.line_no, x.replayed])).toEqual([
      [7, true],
      [8, false],
    ]);
    expect(rej.rows[1].replay_result).toMatch(/^still rejected: invalid_json/);

    const status = await readStatus(tw.w.db);
    expect(status.rejects).toEqual([
      { source: 'export', errorCode: 'invalid_json', open: 1, replayed: 0, closed: 0 },
      { source: 'export', errorCode: 'invalid_uuid', open: 0, replayed: 1, closed: 0 },
    ]);
    expect(status.messages.live).toBe(1);
  });
});
