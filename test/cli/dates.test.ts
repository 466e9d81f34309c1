import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Every date a user types goes through one calendar: a date that is not in it (2026-02-30, year
 * 0000) is refused by every command's date option before anything is read or written, with exit 2
 * and a line that says what is wrong with it.
 */
const root = path.resolve(import.meta.dirname, '..', '..');

function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const base: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'warn' };
  for (const k of Object.keys(base)) if (k.startsWith('CRS_') || k === 'DATABASE_URL') delete base[k];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, 'bin/crs-sync.js'), ...args], {
      env: { ...base, ...env },
      cwd: mkdtempSync(path.join(tmpdir(), 'crs-cli-dates-')),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => {
      stderr += b.toString('utf8');
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

describe('a date that is not in the calendar', () => {
  let tw: TestWarehouse;
  let env: Record<string, string>;
  let file: string;
  beforeAll(async () => {
    tw = await createTestWarehouse({ migrate: true });
    // Temporal is never reached: the date is refused first (port 1 would fail with exit 1).
    env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema, TEMPORAL_ADDRESS: '127.0.0.1:1' };
    file = path.join(mkdtempSync(path.join(tmpdir(), 'crs-cli-dates-data-')), 'feb.jsonl');
    writeFileSync(file, toJsonl(makeRecords(5, { seed: 'dates' })));
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when import is given --from 2026-02-30, then it exits 2 saying February 2026 has 28 days, and loads nothing', async () => {
    const r = await cli(['import', file, '--from', '2026-02-30', '--to', '2026-03-01', '--no-progress'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      '--from: "2026-02-30" is not a date (YYYY-MM-DD): 2026-02-30 is not in the calendar: February 2026 has 28 days',
    );
    const runs = await tw.w.db.selectFrom('sync_runs').select('load_id').execute();
    const rows = await tw.w.db.selectFrom('analytics_messages').select('message_id').execute();
    expect([runs, rows]).toEqual([[], []]);
  });

  it('when any command is given a day of year 0000 or 2026-02-30, then it exits 2 naming the option and why', async () => {
    const cases: [string[], string, string][] = [
      [['import', file, '--from', '2026-02-28', '--to', '0000-12-31'], '--to', '0000-12-31'],
      [['sync', '--from', '2026-02-30', '--detach'], '--from', '2026-02-30'],
      [['sync', '--to', '0000-12-31', '--detach'], '--to', '0000-12-31'],
      [['backfill', '--from', '0000-12-31', '--to', '2026-01-01', '--detach'], '--from', '0000-12-31'],
      [['deletes', 'list', '--day', '0000-02-29'], '--day', '0000-02-29'],
      [['deletes', 'apply', '--day', '2026-11-01', '0000-03-01'], '--day', '0000-03-01'],
      [['rollups', 'rebuild', '--from', '0000-12-31', '--to', '2026-01-01'], '--from', '0000-12-31'],
      [['rollups', 'rebuild', '--from', '2026-01-01', '--to', '2026-02-30'], '--to', '2026-02-30'],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(args, env)));
    for (const [i, [args, option, value]] of cases.entries()) {
      const r = results[i] ?? { code: null, stderr: '' };
      const why = value.startsWith('0000') ? 'year 0000 does not exist' : 'February 2026 has 28 days';
      expect({ args, code: r.code, said: r.stderr.includes(`${option}: "${value}" is not a date`) }).toEqual({
        args,
        code: 2,
        said: true,
      });
      expect(r.stderr, args.join(' ')).toContain(why);
    }
    const runs = await tw.w.db.selectFrom('sync_runs').select('load_id').execute();
    expect(runs).toEqual([]);
  });
});
