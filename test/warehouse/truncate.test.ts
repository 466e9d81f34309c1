import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliSync } from '../helpers/cli.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

function cli(args: string[], env: Record<string, string>) {
  return cliSync(args, { env });
}

describe('a raw table truncated by hand', () => {
  let tw: TestWarehouse;
  let env: Record<string, string>;
  beforeAll(async () => {
    tw = await createTestWarehouse();
    env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema };
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'crs-trunc-')), 'x.jsonl');
    writeFileSync(file, toJsonl(makeRecords(30, { seed: 'trunc' })));
    expect(cli(['import', file, '--no-progress'], env).code).toBe(0);
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  const status = () => JSON.parse(cli(['rollups', 'status', '--json'], env).stdout);

  for (const table of ['analytics_messages', 'thread_messages', 'citations', 'artifacts', 'threads']) {
    it(`when ${table} is truncated, then rollups status says a rebuild is needed and the views stop reading the rollups`, async () => {
      // A rebuild first, so the rollups are current before the TRUNCATE.
      expect(cli(['rollups', 'rebuild'], env).code).toBe(0);
      expect(status()).toMatchObject({ current: true, rebuildNeeded: false });
      await tw.w.pool.query(`truncate ${table} cascade`);
      expect(status()).toMatchObject({ current: false, rebuildNeeded: true });
      const daily = await tw.w.pool.query('select coalesce(sum(messages), 0)::int n from daily_usage');
      const raw = await tw.w.pool.query(
        'select count(*)::int n from analytics_messages where _deleted_at is null',
      );
      expect(daily.rows[0].n).toBe(raw.rows[0].n);
    });
  }
});
