import { spawn, spawnSync } from 'node:child_process';
import { sql } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openWarehouse } from '../../src/warehouse/db.ts';
import { LOCAL_TEST_DATABASE } from '../helpers/test-database.ts';
import { provided } from '../helpers/tier.ts';

/**
 * This file is a unit test, so test/setup/tier-guard.ts runs before it: whatever reaches beyond
 * the tier fails at once with what to do (list the file in test/tiers.ts), whether or not a
 * server answers on this machine.
 */
const MOVE = /test tier "unit" has no .*List the file under INTEGRATION .* in test\/tiers\.ts/;

describe('the unit tier guard', () => {
  it('when a unit test connects to PostgreSQL (a pg client, or a warehouse pool), then it fails at once naming test/tiers.ts', async () => {
    const c = new pg.Client({ connectionString: LOCAL_TEST_DATABASE });
    await expect(c.connect()).rejects.toThrow(MOVE);
    const w = openWarehouse({ url: LOCAL_TEST_DATABASE, schema: 'never_made', max: 1 });
    try {
      await expect(sql`select 1`.execute(w.db)).rejects.toThrow(/has no PostgreSQL/);
    } finally {
      await w.close();
    }
  });

  it('when a unit test starts a child process, then it fails at once naming test/tiers.ts', () => {
    expect(() => spawn(process.execPath, ['-e', '0'])).toThrow(MOVE);
    expect(() => spawnSync(process.execPath, ['-e', '0'])).toThrow(/child processes \(spawnSync /);
  });

  it('when a unit test asks for the PostgreSQL or the Temporal server of the run, then there is none, and the error says where to list the file', () => {
    expect(() => provided('databaseUrl')).toThrow(/tier "unit" has no PostgreSQL: list this file/);
    expect(() => provided('temporalAddress')).toThrow(
      /has no Temporal dev server: list this file under SYSTEM/,
    );
  });
});
