import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliSync } from '../helpers/cli.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

function cli(args: string[], env: Record<string, string | undefined> = {}) {
  return cliSync(args, { env });
}

describe('the crs-sync command', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse({ migrate: false });
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when the command is unknown, then it exits 2 and says so', () => {
    const r = cli(['no-such-command']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown command 'no-such-command'");
  });

  it('when settings are bad, then it exits 2 listing every bad setting', () => {
    const r = cli(['status'], { CRS_SCHEMA: 'Not Valid', CRS_LOOKBACK_DAYS: 'x' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('CRS_SCHEMA');
    expect(r.stderr).toContain('CRS_LOOKBACK_DAYS');
  });

  it('when the database cannot be reached, then it exits 1 with the reason and no password', () => {
    const r = cli(['status'], { DATABASE_URL: 'postgres://crs:hunter2-secret@127.0.0.1:1/crs' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot reach the warehouse database/);
    expect(r.stderr).not.toContain('hunter2-secret');
  });

  it('when a file with bad lines is imported, then it exits 0, prints the summary and status shows the quarantine', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'crs-cli-data-'));
    const file = path.join(dir, 'x.jsonl');
    writeFileSync(file, toJsonl([...makeRecords(20, { seed: 'cli' }), 'not json']));
    const env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema };
    const imp = cli(['import', file, '--no-progress'], env);
    expect(imp.code).toBe(0);
    expect(imp.stdout).toMatch(/inserted\s+20/);
    expect(imp.stdout).toMatch(/rejected\s+1/);
    const st = cli(['status', '--json'], env);
    expect(st.code).toBe(0);
    const s = JSON.parse(st.stdout);
    expect(s.messages.live).toBe(20);
    expect(s.rejects).toEqual([
      { source: 'file', errorCode: 'invalid_json', open: 1, replayed: 0, closed: 0 },
    ]);
  });

  it('when the file does not exist, then import exits 1 naming it', () => {
    const r = cli(['import', '/nonexistent/file.jsonl'], { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('/nonexistent/file.jsonl');
  });
});
