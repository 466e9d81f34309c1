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

/** A column of the text status's recent runs, by its header, as the table prints it (rows in order). */
function runsColumn(status: string, name: string): string[] {
  const lines = status.split('\n');
  const at = lines.indexOf('Recent runs:');
  const head = lines[at + 1] ?? '';
  const dashes = lines[at + 2] ?? '';
  // Each column is a run of dashes under its header.
  const spans = [...dashes.matchAll(/-+/g)].map((m) => [m.index, m.index + m[0].length] as const);
  const span = spans.find(([from, to]) => head.slice(from, to).trim() === name);
  if (!span) return [];
  const rows: string[] = [];
  for (const line of lines.slice(at + 3)) {
    if (line.trim() === '') break;
    rows.push(line.slice(span[0], span[1]).trim());
  }
  return rows;
}

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

  it('when no load has suppressed anything, then status shows no suppressed column, and 0 in its JSON', () => {
    const text = cli(['status'], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/Recent runs:/);
    expect(text.stdout).not.toMatch(/suppressed/);
    const json = cli(['status', '--json'], env);
    expect(json.code).toBe(0);
    const runs = JSON.parse(json.stdout).recentRuns as { suppressed: number; rowsRead: number }[];
    expect(runs).toEqual([expect.objectContaining({ rowsRead: records.length, suppressed: 0 })]);
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

  it("when the export is imported again after the erasure, then status shows the run's suppressed lines, in text and JSON", () => {
    // One more record: another file, so another load (the same file would be the same load).
    const again = path.join(path.dirname(file), 'again.jsonl');
    writeFileSync(again, toJsonl([...records, ...makeRecords(1, { seed: 'cli-forget-more' })]));
    const r = cli(['import', again, '--no-progress'], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const json = cli(['status', '--json'], env);
    expect(json.code).toBe(0);
    const runs = JSON.parse(json.stdout).recentRuns as { suppressed: number; rowsRead: number }[];
    // Newest first: the import after the erasure, then the first one.
    expect(runs.map((x) => [x.rowsRead, x.suppressed])).toEqual([
      [records.length + 1, mine],
      [records.length, 0],
    ]);
    const text = cli(['status'], env);
    expect(text.code).toBe(0);
    expect(runsColumn(text.stdout, 'suppressed')).toEqual([String(mine), '0']);
    expect(runsColumn(text.stdout, 'read')).toEqual([String(records.length + 1), String(records.length)]);
  });
});
