import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliClean } from '../helpers/cli.ts';
import { createTestWarehouse, migrateToBefore, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Defaults for a deployment nobody watches, met as its operator meets them: the real `crs-sync`
 * process. A worker whose DATABASE_URL went missing stops instead of filling a local database,
 * a command that only reads never changes the schema, and an expected warning stays one readable
 * line.
 */
const _root = path.resolve(import.meta.dirname, '..', '..');
const STACK_LINE = /^\s+at /m;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], env: Record<string, string | undefined> = {}): Promise<Result> {
  return cliClean(args, { env, tmpPrefix: 'crs-safe-' });
}

const service = { CRS_BASE_URL: 'http://127.0.0.1:1', CRS_SERVICE_ACCOUNT_TOKEN: 'x.y.z' };

describe('a worker or a schedule without DATABASE_URL', () => {
  it.each([
    ['worker', ['worker']],
    ['schedule create', ['schedule', 'create']],
  ])(
    'when %s runs without DATABASE_URL, then it exits 2 naming DATABASE_URL and the opt-in, and starts nothing',
    async (_name, args) => {
      const r = await run(args, { ...service, TEMPORAL_ADDRESS: '127.0.0.1:1' });
      expect(r.stderr).not.toMatch(STACK_LINE);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('refuses to run without DATABASE_URL');
      expect(r.stderr).toContain('--allow-embedded');
      expect(r.stderr).toContain('CRS_ALLOW_EMBEDDED=1');
      // Refused before the embedded PostgreSQL was started (no "using the embedded PostgreSQL").
      expect(r.stderr).not.toContain('using the embedded PostgreSQL');
    },
  );

  it('when the help of worker and schedule create is read, then it names the opt-in', async () => {
    for (const args of [
      ['worker', '--help'],
      ['schedule', 'create', '--help'],
    ]) {
      const r = await run(args);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('--allow-embedded');
    }
  });
});

describe('the warning of a worker without thread-API credentials', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'tsafew' });
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when a worker starts at LOG_LEVEL=info without them, then the warning says "required" in full and carries no stack trace', async () => {
    // Temporal unreachable: the worker warns, then fails to connect (exit 1); the warning is what matters.
    const r = await run(['worker'], {
      ...service,
      DATABASE_URL: tw.url,
      CRS_SCHEMA: tw.schema,
      TEMPORAL_ADDRESS: '127.0.0.1:1',
      LOG_LEVEL: 'info',
    });
    const warning = r.stderr.split('\n').find((l) => l.includes('thread API credentials are missing'));
    expect(warning).toBeDefined();
    const entry = JSON.parse(warning ?? '{}') as Record<string, unknown>;
    expect(JSON.stringify(entry)).toContain('CRS_ACCESS_TOKEN: required for the thread API');
    expect(JSON.stringify(entry)).not.toContain('[redacted]');
    expect(JSON.stringify(entry)).not.toContain('stack');
    expect(JSON.stringify(entry)).not.toMatch(/\bat .+\.ts:\d+/);
  });
});

describe('commands that only read, on a schema behind the code', () => {
  let tw: TestWarehouse;
  let absent: TestWarehouse;
  let applied: string[];
  let last: string;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'tsafer', migrate: false });
    absent = await createTestWarehouse({ prefix: 'tsafea', migrate: false });
    // Every migration but the last: the schema of the version before this one.
    const all = await migrateToBefore(tw);
    last = all[all.length - 1] ?? '';
    applied = await migrationNames(tw);
  });
  afterAll(async () => {
    await tw?.dispose();
    await absent?.dispose();
  });

  async function migrationNames(t: TestWarehouse): Promise<string[]> {
    const r = await t.w.pool.query<{ name: string }>(
      `select name from "${t.schema}".kysely_migration order by name`,
    );
    return r.rows.map((x) => x.name);
  }

  it.each([
    ['status', ['status']],
    ['status --json', ['status', '--json']],
    ['rejects list', ['rejects', 'list']],
    ['deletes list', ['deletes', 'list']],
    ['rollups status', ['rollups', 'status']],
    ['dashboard', ['dashboard', '--port', '0']],
  ])(
    'when %s runs on a schema one migration behind, then it exits 2 saying to run crs-sync migrate, and the schema is unchanged',
    async (_name, args) => {
      const r = await run(args, { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema });
      expect(r.stderr).not.toMatch(STACK_LINE);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('run crs-sync migrate');
      expect(r.stderr).toContain(last);
      expect(await migrationNames(tw)).toEqual(applied);
      expect(applied).not.toContain(last);
    },
  );

  it('when status runs where the schema does not exist, then it exits 2 saying to run crs-sync migrate and creates nothing; after migrate it reads it', async () => {
    const env = { DATABASE_URL: absent.url, CRS_SCHEMA: absent.schema };
    const r = await run(['status'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('run crs-sync migrate');
    const s = await absent.w.pool.query('select 1 from pg_namespace where nspname = $1', [absent.schema]);
    expect(s.rowCount).toBe(0);
    expect((await run(['migrate'], env)).code).toBe(0);
    const after = await run(['status', '--json'], env);
    expect(after.code).toBe(0);
    expect(JSON.parse(after.stdout)).toHaveProperty('days');
  });
});
