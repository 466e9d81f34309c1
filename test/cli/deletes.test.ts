import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliSync } from '../helpers/cli.ts';
import { type FakeRecord, makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Held deletes and the loads that come after them, as an operator meets them: files imported with
 * the real CLI, `deletes list` and `deletes apply` read and applied with it.
 */

function cli(args: string[], env: Record<string, string>) {
  return cliSync(args, { env });
}

describe('held deletes against later loads', () => {
  let tw: TestWarehouse;
  let env: Record<string, string>;
  let dir: string;
  let files = 0;
  beforeAll(async () => {
    tw = await createTestWarehouse();
    env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema, CRS_BATCH_SIZE: '20' };
    dir = mkdtempSync(path.join(tmpdir(), 'crs-deletes-'));
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  /** Each import its own file: an import's load id is derived from its file. */
  const importLines = (lines: (FakeRecord | string)[], ...args: string[]) => {
    const file = path.join(dir, `f${++files}.jsonl`);
    writeFileSync(file, toJsonl(lines));
    const r = cli(['import', file, '--no-progress', ...args], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    return r;
  };
  const live = async (day: string) =>
    Number(
      (
        await tw.w.pool.query(
          'select count(*) n from analytics_messages where message_date = $1 and _deleted_at is null',
          [day],
        )
      ).rows[0].n,
    );
  const list = (day: string) => JSON.parse(cli(['deletes', 'list', '--day', day, '--json'], env).stdout);
  const apply = (...args: string[]) => {
    const r = cli(['deletes', 'apply', ...args, '--json'], env);
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout).applied;
  };

  it('when a partial export holds deletes and the full file is imported again unchanged, then list shows nothing applicable and apply deletes nothing', async () => {
    const day = '2026-10-01';
    const recs = makeRecords(100, { day, seed: 'again' });
    importLines(recs);
    importLines(recs.slice(0, 50), '--from', day, '--to', day);
    expect(list(day).days).toEqual([expect.objectContaining({ day, held: 50, applicable: 50 })]);

    // The same full file again, every row unchanged, without --from/--to.
    const again = importLines(recs);
    expect(again.stdout).toMatch(/unchanged\s+100/);

    const after = list(day);
    expect(after.days.reduce((n: number, d: { applicable: number }) => n + d.applicable, 0)).toBe(0);
    const applied = apply('--day', day);
    expect(applied.reduce((n: number, d: { deleted: number }) => n + d.deleted, 0)).toBe(0);
    expect(await live(day)).toBe(100);
    const ledger = await tw.w.pool.query('select deletes_held from sync_days where day = $1', [day]);
    expect(Number(ledger.rows[0].deletes_held)).toBe(0);
  });

  it('when a later import sees only some held ids (one as a quarantined line with a readable id), then only the others stay held and apply deletes only them', async () => {
    const day = '2026-10-02';
    const recs = makeRecords(100, { day, seed: 'some' });
    importLines(recs);
    importLines(recs.slice(0, 50), '--from', day, '--to', day);
    // Rows 50-59 come back (changed: 50-54, unchanged: 55-59), row 60 as a line the parser rejects.
    const changed = recs.slice(50, 55).map((r) => ({ ...r, Response: `${r.Response} edited` }));
    const bad = JSON.stringify(recs[60]).replace(/"Message Time":"[^"]*"/, '"Message Time":"soon"');
    importLines([...changed, ...recs.slice(55, 60), bad]);

    expect(list(day).days).toEqual([expect.objectContaining({ day, held: 39, applicable: 39 })]);
    expect(apply('--day', day)).toEqual([{ day, held: 39, deleted: 39, skipped: 0, notApplied: null }]);
    expect(await live(day)).toBe(61);
    const ledger = await tw.w.pool.query('select rows_deleted from sync_days where day = $1', [day]);
    expect(Number(ledger.rows[0].rows_deleted)).toBe(39);
  });

  it('when a later import quarantines a line whose id cannot be read, then apply skips the held day and says why, and applies it only when named with --force', async () => {
    const day = '2026-10-03';
    const recs = makeRecords(60, { day, seed: 'unreadable' });
    importLines(recs);
    importLines(recs.slice(0, 30), '--from', day, '--to', day);
    // A line that may be one of the held rows, but whose id nobody can read.
    importLines(['{"Message ID": 12, "Input": "x"', ...recs.slice(0, 2)]);

    const held = list(day).days;
    expect(held).toEqual([
      expect.objectContaining({ day, held: 30, forceReason: expect.stringMatching(/cannot be read/) }),
    ]);
    const text = cli(['deletes', 'list', '--day', day], env);
    expect(text.stdout).toMatch(/needs --force/);

    const skipped = apply('--day', day);
    expect(skipped).toEqual([
      { day, held: 30, deleted: 0, skipped: 30, notApplied: expect.stringMatching(/cannot be read/) },
    ]);
    const all = cli(['deletes', 'apply', '--all'], env);
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/not applied, needs --force/);
    expect(await live(day)).toBe(60);
    expect(cli(['deletes', 'apply', '--all', '--force'], env).code).toBe(2);
    expect(cli(['deletes', 'apply', '--help'], env).stdout).toMatch(/--force/);

    expect(apply('--day', day, '--force')).toEqual([
      { day, held: 30, deleted: 30, skipped: 0, notApplied: null },
    ]);
    expect(await live(day)).toBe(30);
  });

  it('when held deletes are applied and the day is loaded again in full, then rows_deleted still counts them', async () => {
    const day = '2026-10-04';
    const recs = makeRecords(40, { day, seed: 'ledger' });
    importLines(recs, '--from', day, '--to', day);
    importLines(recs.slice(0, 20), '--from', day, '--to', day);
    expect(apply('--day', day)).toEqual([expect.objectContaining({ day, held: 20, deleted: 20 })]);
    const rowsDeleted = async () =>
      Number(
        (await tw.w.pool.query('select rows_deleted from sync_days where day = $1', [day])).rows[0]
          .rows_deleted,
      );
    expect(await rowsDeleted()).toBe(20);
    // The export as it now is (the 20 rows left), loaded again: nothing more to delete.
    importLines(recs.slice(0, 20), '--from', day, '--to', day);
    expect(await rowsDeleted()).toBe(20);
    // One of the deleted rows comes back: the day has one deleted row fewer.
    importLines(recs.slice(0, 21), '--from', day, '--to', day);
    expect(await rowsDeleted()).toBe(19);
  });
});
