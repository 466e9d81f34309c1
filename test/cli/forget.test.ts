import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliSync } from '../helpers/cli.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * `crs-sync forget` as a data team meets it: a file imported with the real CLI, a dry run, the
 * erasure and the list of erasures (never the id).
 */

const cli = (args: string[], env: Record<string, string>) => cliSync(args, { env });

describe('crs-sync forget', () => {
  let tw: TestWarehouse;
  let env: Record<string, string>;
  let file: string;
  const records = makeRecords(60, { seed: 'cli-forget', threads: 6 });
  const user = records[0]!['User ID'];
  const mine = records.filter((r) => r['User ID'] === user).length;
  const rows = async (sql: string, values: unknown[] = []) =>
    Number((await tw.w.pool.query(`select (${sql})::int as n`, values)).rows[0].n);

  beforeAll(async () => {
    tw = await createTestWarehouse();
    env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema, CRS_BATCH_SIZE: '20' };
    file = path.join(mkdtempSync(path.join(tmpdir(), 'crs-forget-cli-')), 'day.jsonl');
    writeFileSync(file, toJsonl(records));
    const r = cli(['import', file, '--no-progress'], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when forget runs without an id, then it says how to use it and exits 2', () => {
    const r = cli(['forget'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/name at least one --user ID or --thread ID/);
  });

  it('when a dry run names a user, then it prints the rows per table and erases nothing', async () => {
    const r = cli(['forget', '--user', user, '--dry-run'], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`analytics_messages\\s+│?\\s*${mine}\\b`));
    expect(r.stdout).toMatch(/dry run: nothing erased \(1 user\(s\), 2 thread\(s\)\)/);
    expect(await rows('select count(*) from analytics_messages where user_id = $1', [user])).toBe(mine);
  });

  it('when the user is forgotten, then their rows are gone and the list shows the erasure without the id', async () => {
    const r = cli(['forget', '--user', user.toUpperCase(), '--reason', 'DSR-77', '--json'], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ dryRun: false, users: 1, threads: 2, rows: { analytics_messages: mine } });
    expect(await rows('select count(*) from analytics_messages where user_id = $1', [user])).toBe(0);
    expect(await rows('select count(*) from analytics_messages')).toBe(records.length - mine);
    const list = cli(['forget', 'list', '--json'], env);
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout).erasures).toEqual([
      expect.objectContaining({ id: out.erasureId, reason: 'DSR-77', users: 1, threads: 2 }),
    ]);
    expect(list.stdout.toLowerCase()).not.toContain(user.toLowerCase());
    const table = cli(['forget', 'list'], env);
    expect(table.stdout).toMatch(/DSR-77/);
  });
});
