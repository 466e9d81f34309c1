import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliSync } from '../helpers/cli.ts';
import { type FakeRecord, makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * A renamed setting as an operator meets it: the real CLI importing into a real Postgres schema,
 * with the old name, the new one, and both.
 */

function cli(args: string[], env: Record<string, string>) {
  return cliSync(args, { env, logLevel: 'warn', tmpPrefix: 'crs-renamed-' });
}

/** A day's file whose first record carries a field the contract does not know. */
function driftedFile(day: string): string {
  const records: FakeRecord[] = makeRecords(4, { day, seed: `renamed-${day}` });
  (records[0] as FakeRecord).Sentiment = 'positive';
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'crs-renamed-data-')), `${day}.jsonl`);
  writeFileSync(file, toJsonl(records));
  return file;
}

const WARNING = 'CRS_SCHEMA_CONTRACT is renamed CRS_RECORD_CONTRACT';

describe('renamed settings in the CLI', () => {
  let tw: TestWarehouse;
  let env: Record<string, string>;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'renamed' });
    env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema };
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  const liveRows = async (day: string) =>
    Number(
      (
        await tw.w.db
          .selectFrom('analytics_messages')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('message_date', '=', day)
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('when the contract is set by its old name, then it holds (the drifted record is quarantined) and the command warns once, naming the new name', async () => {
    const r = cli(['import', driftedFile('2026-10-01'), '--no-progress'], {
      ...env,
      CRS_SCHEMA_CONTRACT: 'freeze',
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/inserted\s+3/);
    expect(r.stdout).toMatch(/rejected\s+1/);
    expect(r.stderr.split(WARNING).length - 1).toBe(1);
  });

  it('when it is set by its new name, then it holds the same and nothing warns', () => {
    const r = cli(['import', driftedFile('2026-10-02'), '--no-progress'], {
      ...env,
      CRS_RECORD_CONTRACT: 'freeze',
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/rejected\s+1/);
    expect(r.stderr).not.toContain('is renamed');
  });

  it('when the old and the new name disagree, then the command exits 2 naming both, and loads nothing', async () => {
    const r = cli(['import', driftedFile('2026-10-03'), '--no-progress'], {
      ...env,
      CRS_SCHEMA_CONTRACT: 'freeze',
      CRS_RECORD_CONTRACT: 'evolve',
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('CRS_SCHEMA_CONTRACT, CRS_RECORD_CONTRACT: both are set, to different values');
    expect(await liveRows('2026-10-03')).toBe(0);
  });
});
