import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grantReader } from '../../src/warehouse/privacy/reader.ts';
import { type LoadedWarehouse, loadWarehouse } from '../dashboard/fixture.ts';

// The example dbt project (examples/dbt), run by real dbt as a role `crs-sync grant-reader`
// made: it builds a view, a table and an incremental model over the data schema's tables and
// views in a schema of its own, its data tests pass, and a model over the quarantine is refused.
// dbt is installed by scripts/ensure-dbt.ts (CI runs it); without it this file fails, saying so.

const root = path.resolve(import.meta.dirname, '..', '..');
const project = path.join(root, 'examples', 'dbt');
let dbt = '';
let lw: LoadedWarehouse;
let work: string;
const role = `crs_dbt_${randomBytes(4).toString('hex')}`;
const dbtSchema = `${role}_models`;

interface Ran {
  code: number;
  out: string;
}
function runDbt(args: string[]): Promise<Ran> {
  const url = new URL(lw.tw.url);
  const env = {
    ...process.env,
    PGHOST: url.hostname,
    PGPORT: url.port || '5432',
    PGDATABASE: decodeURIComponent(url.pathname.slice(1)),
    DBT_USER: role,
    DBT_PASSWORD: '',
    CRS_SCHEMA: lw.tw.schema,
    DBT_SCHEMA: dbtSchema,
    DBT_PROFILES_DIR: project,
    DBT_SEND_ANONYMOUS_USAGE_STATS: 'false',
  };
  const common = ['--project-dir', project, '--target-path', path.join(work, 'target'), '--log-path', work];
  return new Promise((resolve) => {
    execFile(dbt, [...args, ...common], { env, cwd: work }, (err, stdout, stderr) => {
      const code = err ? Number((err as NodeJS.ErrnoException & { code?: unknown }).code ?? 1) || 1 : 0;
      resolve({ code, out: `${stdout}${stderr}` });
    });
  });
}

beforeAll(async () => {
  const { execFileSync } = await import('node:child_process');
  dbt = execFileSync(process.execPath, [path.join(root, 'scripts', 'ensure-dbt.ts')], {
    encoding: 'utf8',
  }).trim();
  if (!existsSync(dbt)) throw new Error(`dbt not found at ${dbt}: run node scripts/ensure-dbt.ts`);
  work = mkdtempSync(path.join(tmpdir(), 'crs-dbt-'));
  lw = await loadWarehouse(20261129);
  const owner = lw.tw.w;
  await owner.pool.query(`create role ${role} login`);
  // What a DBA gives a dbt user besides read access: a schema of its own to build models in.
  await owner.pool.query(`create schema ${dbtSchema} authorization ${role}`);
  await grantReader(owner, role);
}, 300_000);
afterAll(async () => {
  const owner = lw?.tw.w;
  if (owner) {
    await owner.pool.query(`drop schema if exists ${dbtSchema} cascade`);
    await owner.pool.query(`drop owned by ${role}`).catch(() => {});
    await owner.pool.query(`drop role if exists ${role}`).catch(() => {});
  }
  await lw?.dispose();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the example dbt project as the reader role', () => {
  it('when dbt builds it, then its view, table and incremental models hold the warehouse figures and every data test passes', async () => {
    const built = await runDbt(['build', '--exclude', 'tag:refused']);
    expect(built.out).toMatch(/Completed successfully/);
    expect(built.code, built.out).toBe(0);
    const owner = lw.tw.w.pool;
    const daily = await owner.query(
      `select message_date::text as day, messages::int from ${dbtSchema}.daily order by 1`,
    );
    const usage = await owner.query(
      `select message_date::text as day, messages::int from daily_usage order by 1`,
    );
    expect(daily.rows.length).toBeGreaterThan(0);
    expect(daily.rows).toEqual(usage.rows);
    const users = await owner.query(`select sum(messages)::int as n from ${dbtSchema}.user_days`);
    const live = await owner.query(
      `select count(*)::int as n from analytics_messages where _deleted_at is null`,
    );
    expect(users.rows[0].n).toBe(live.rows[0].n);

    // A second run takes dbt's incremental path (a merge into the existing table).
    const again = await runDbt(['run', '--select', 'user_days']);
    expect(again.code, again.out).toBe(0);
    expect(again.out).toMatch(/incremental model/);
    const after = await owner.query(`select sum(messages)::int as n from ${dbtSchema}.user_days`);
    expect(after.rows[0].n).toBe(live.rows[0].n);
  }, 180_000);

  it('when a model reads the quarantine, then dbt is refused on the internal schema and builds nothing', async () => {
    const refused = await runDbt(['run', '--select', 'tag:refused']);
    expect(refused.code).not.toBe(0);
    expect(refused.out).toContain(`permission denied for schema ${lw.tw.schema}_internal`);
    const made = await lw.tw.w.pool.query(
      `select count(*)::int as n from information_schema.tables where table_schema = $1 and table_name = 'quarantine_lines'`,
      [dbtSchema],
    );
    expect(made.rows[0].n).toBe(0);
  }, 120_000);
});
