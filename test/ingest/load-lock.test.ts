import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { isCrsError } from '../../src/errors.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

// Two processes running the same load (same load id, so the same checkpoint rows) would count
// its lines twice: a load holds a session advisory lock on its key while it runs.

const log = createLogger({ level: 'silent', pretty: false });
const config = parseConfig({ CRS_BATCH_SIZE: '50', CRS_LOAD_PARTITIONS: '2' });

describe('one load at a time per load key', () => {
  let tw: TestWarehouse;
  let holder: pg.Client;
  const dir = mkdtempSync(path.join(tmpdir(), 'crs-lock-'));
  const file = path.join(dir, 'day.jsonl');
  beforeAll(async () => {
    tw = await createTestWarehouse();
    writeFileSync(file, toJsonl(makeRecords(120, { seed: 'lock', day: '2026-08-02' })));
    holder = new pg.Client({ connectionString: tw.url });
    await holder.connect();
  });
  afterAll(async () => {
    await holder?.end();
    await tw?.dispose();
  });

  it('when another session runs the same load, then the import fails retryably at once, loads nothing, and succeeds once that load has ended', async () => {
    const key = `crs-sync:load:${tw.w.schema}:lock-test`;
    await holder.query('select pg_advisory_lock(hashtext($1))', [key]);
    const err = await importFile(tw.w, config, log, { file, loadId: 'lock-test' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isCrsError(err) && err.code).toBe('LOAD_BUSY');
    expect(isCrsError(err) && err.retryable).toBe(true);
    const during = await tw.w.pool.query('select count(*)::int n from analytics_messages');
    expect(during.rows[0].n).toBe(0);

    await holder.query('select pg_advisory_unlock(hashtext($1))', [key]);
    const s = await importFile(tw.w, config, log, { file, loadId: 'lock-test' });
    expect([s.rowsRead, s.inserted]).toEqual([120, 120]);
    // The lock is released at the end: the same load can run again (a resume with nothing left).
    const again = await importFile(tw.w, config, log, { file, loadId: 'lock-test' });
    expect(again.resumed).toBe(true);
    const after = await tw.w.pool.query('select count(*)::int n from analytics_messages');
    expect(after.rows[0].n).toBe(120);
  });

  it('when the same load id is used in another schema, then the loads do not block each other', async () => {
    const other = await createTestWarehouse();
    try {
      await holder.query('select pg_advisory_lock(hashtext($1))', [`crs-sync:load:${tw.w.schema}:shared-id`]);
      const s = await importFile(other.w, config, log, { file, loadId: 'shared-id' });
      expect(s.inserted).toBe(120);
    } finally {
      await holder.query('select pg_advisory_unlock_all()');
      await other.dispose();
    }
  });
});
