import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openConfiguredWarehouse } from '../../src/cli/context.ts';
import { parseConfig } from '../../src/config.ts';
import { CrsError } from '../../src/errors.ts';
import { createLogger } from '../../src/log.ts';
import { DEFAULT_DB_TIMEOUTS, openWarehouse } from '../../src/warehouse/db.ts';
import { migrateToLatest } from '../../src/warehouse/migrator.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

describe('database settings', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'dbset' });
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when no database setting is given, then the configuration defaults equal the warehouse defaults', () => {
    const c = parseConfig({});
    expect(c.db).toEqual({
      statementTimeoutMs: DEFAULT_DB_TIMEOUTS.statementMs,
      lockTimeoutMs: DEFAULT_DB_TIMEOUTS.lockMs,
      idleTxTimeoutMs: DEFAULT_DB_TIMEOUTS.idleTxMs,
      migrationTimeoutMs: DEFAULT_DB_TIMEOUTS.migrationMs,
      keepAliveMs: DEFAULT_DB_TIMEOUTS.keepAliveMs,
    });
    expect(c.stallTimeoutMs).toBe(300_000);
  });

  it('when a database timeout is negative or not a number, then the configuration is invalid and names it', () => {
    const err = (() => {
      try {
        parseConfig({
          CRS_DB_STATEMENT_TIMEOUT_MS: '-1',
          CRS_DB_LOCK_TIMEOUT_MS: 'soon',
          CRS_STALL_TIMEOUT_MS: '1.5',
        });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(CrsError);
    const problems = (err as CrsError).details?.problems as string[];
    expect(problems.some((p) => p.startsWith('CRS_DB_STATEMENT_TIMEOUT_MS'))).toBe(true);
    expect(problems.some((p) => p.startsWith('CRS_DB_LOCK_TIMEOUT_MS'))).toBe(true);
    expect(problems.some((p) => p.startsWith('CRS_STALL_TIMEOUT_MS'))).toBe(true);
  });

  it("when another migrator holds the schema's migration lock past the migration timeout, then migrating fails retryably with DB_TIMEOUT", async () => {
    const fresh = await createTestWarehouse({ prefix: 'dbsetmig', migrate: false });
    const holder = await tw.w.pool.connect();
    try {
      await holder.query('select pg_advisory_lock(hashtext($1))', [`crs-sync:migrate:${fresh.schema}`]);
      const w = openWarehouse({
        url: fresh.url,
        schema: fresh.schema,
        max: 2,
        timeouts: { migrationMs: 200 },
      });
      try {
        const err = await migrateToLatest(w).catch((e: unknown) => e);
        expect(err).toMatchObject({ code: 'DB_TIMEOUT', retryable: true });
        expect((err as Error).message).toContain('CRS_DB_MIGRATION_TIMEOUT_MS');
      } finally {
        await w.close();
      }
    } finally {
      await holder.query('select pg_advisory_unlock(hashtext($1))', [`crs-sync:migrate:${fresh.schema}`]);
      holder.release();
      await fresh.dispose();
    }
  });

  it("when a command opens the configured warehouse, then every session runs with the configuration's timeouts", async () => {
    const config = parseConfig({
      DATABASE_URL: tw.url,
      CRS_SCHEMA: tw.schema,
      CRS_DB_STATEMENT_TIMEOUT_MS: '4321',
      CRS_DB_LOCK_TIMEOUT_MS: '0',
      CRS_DB_IDLE_TX_TIMEOUT_MS: '65000',
    });
    const opened = await openConfiguredWarehouse(
      { config, log: createLogger({ level: 'silent', pretty: false }) },
      { schema: 'as-is', connections: 1 },
    );
    try {
      const r = await opened.warehouse.pool.query<Record<string, string>>(
        `select current_setting('statement_timeout') s, current_setting('lock_timeout') l,
                current_setting('idle_in_transaction_session_timeout') i`,
      );
      // 0 leaves the server's own setting, which is none here.
      expect(r.rows[0]).toEqual({ s: '4321ms', l: '0', i: '65s' });
    } finally {
      await opened.close();
    }
  });
});
