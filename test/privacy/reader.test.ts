import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAGE_ORDER } from '../../src/dashboard/pages/index.ts';
import { type Dashboard, startDashboard } from '../../src/dashboard/server.ts';
import { openWarehouse, type Warehouse } from '../../src/warehouse/db.ts';
import { grantReader } from '../../src/warehouse/privacy/reader.ts';
import { type LoadedWarehouse, loadWarehouse } from '../dashboard/fixture.ts';

// A role made by `crs-sync grant-reader`, as a BI tool, a dbt project and the dashboard use it:
// every table and view of the data schema reads, a table a later migration adds reads too, the
// bookkeeping and the quarantine do not, and the dashboard shows the same figures as the owner's
// (without the quarantine's example lines).

let lw: LoadedWarehouse;
let reader: Warehouse;
const role = `crs_reader_${randomBytes(4).toString('hex')}`;
const dbtSchema = `${role}_dbt`;

interface Api {
  sections: Record<string, { ok: boolean; data?: unknown; error?: string }>;
}
async function pages(pool: Warehouse['pool']): Promise<Record<string, Api>> {
  const dash: Dashboard = await startDashboard({ pool });
  try {
    const out: Record<string, Api> = {};
    for (const p of PAGE_ORDER) {
      const r = await fetch(`${dash.url}/api/${p}?from=2000-01-01&to=2100-01-01`);
      expect(r.status, p).toBe(200);
      out[p] = (await r.json()) as Api;
    }
    return out;
  } finally {
    await dash.close();
  }
}

const AGE_KEY = /(^|_)age(_seconds)?$/;

/** `v` with every number under an age key replaced by 'age', those numbers pushed to `ages` in order. */
function withoutAges(v: unknown, ages: number[]): unknown {
  if (Array.isArray(v)) return v.map((x) => withoutAges(x, ages));
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (AGE_KEY.test(k) && typeof x === 'number') {
      ages.push(x);
      out[k] = 'age';
    } else out[k] = withoutAges(x, ages);
  }
  return out;
}

beforeAll(async () => {
  lw = await loadWarehouse(20261128);
  const owner = lw.tw.w;
  await owner.pool.query(`create role ${role} login`);
  // What a DBA gives a dbt user besides read access: a schema of its own to build models in.
  await owner.pool.query(`create schema ${dbtSchema} authorization ${role}`);
  await grantReader(owner, role);
  const url = new URL(lw.tw.url);
  url.username = role;
  url.password = '';
  reader = openWarehouse({ url: url.toString(), schema: lw.tw.schema, max: 4 });
}, 240_000);
afterAll(async () => {
  await reader?.close();
  const owner = lw?.tw.w;
  if (owner) {
    await owner.pool.query(`drop schema if exists ${dbtSchema} cascade`);
    await owner.pool.query(`drop owned by ${role}`).catch(() => {});
  }
  await lw?.dispose();
  await openWarehouse({ url: lw.tw.url, schema: 'public', max: 1 })
    .pool.query(`drop role if exists ${role}`)
    .catch(() => {});
});

describe('crs-sync grant-reader', () => {
  it('when the reader reads every table and view of the data schema, then each answers', async () => {
    const { rows } = await lw.tw.w.pool.query<{ name: string }>(
      `select table_name as name from information_schema.tables where table_schema = $1 order by 1`,
      [lw.tw.schema],
    );
    expect(rows.map((r) => r.name)).toEqual(
      expect.arrayContaining(['analytics_messages', 'daily_usage', 'sync_days']),
    );
    for (const { name } of rows) {
      const r = await reader.pool.query(`select count(*)::int as n from ${name}`);
      expect(r.rows[0].n, name).toBeGreaterThanOrEqual(0);
    }
    const counted = await reader.pool.query(`select count(*)::int as n from analytics_messages`);
    expect(counted.rows[0].n).toBeGreaterThan(0);
  });

  it('when the reader asks for the quarantine or any bookkeeping, then it is refused', async () => {
    await expect(reader.pool.query('select * from rejected_records')).rejects.toThrow(/does not exist/);
    await expect(
      reader.pool.query(`select * from ${lw.tw.schema}_internal.rejected_records`),
    ).rejects.toThrow(/permission denied for schema/);
    await expect(
      reader.pool.query(`select * from ${lw.tw.schema}_internal.load_checkpoints`),
    ).rejects.toThrow(/permission denied for schema/);
    // What it may know of the quarantine: counts, no line.
    const q = await reader.pool.query('select sum(open)::int as open from quarantine_counts');
    expect(q.rows[0].open).toBeGreaterThan(0);
  });

  it('when a later migration adds a table to the data schema, then the reader may read it', async () => {
    await lw.tw.w.pool.query('create table later_table (x int)');
    await lw.tw.w.pool.query('insert into later_table values (1)');
    expect((await reader.pool.query('select x from later_table')).rows).toEqual([{ x: 1 }]);
  });

  it('when a dbt-style project builds models as the reader, then models over tables and views build and one over the bookkeeping is refused', async () => {
    // What `dbt run` sends for a table model and a view model (create … as select), in its schema.
    await reader.pool.query(
      `create table ${dbtSchema}.daily as select message_date, count(*) as messages
         from analytics_messages where _deleted_at is null group by 1`,
    );
    await reader.pool.query(`create view ${dbtSchema}.usage as select * from daily_usage`);
    const built = await reader.pool.query(`select sum(messages)::int as n from ${dbtSchema}.daily`);
    const direct = await lw.tw.w.pool.query(
      'select count(*)::int as n from analytics_messages where _deleted_at is null',
    );
    expect(built.rows[0].n).toBe(direct.rows[0].n);
    expect(
      (await reader.pool.query(`select count(*)::int as n from ${dbtSchema}.usage`)).rows[0].n,
    ).toBeGreaterThan(0);
    await expect(
      reader.pool.query(
        `create table ${dbtSchema}.lines as select raw from ${lw.tw.schema}_internal.rejected_records`,
      ),
    ).rejects.toThrow(/permission denied for schema/);
  });

  it('when the dashboard runs as the reader, then every page answers with the owner’s figures, without quarantined lines', async () => {
    const asOwner = await pages(lw.tw.w.pool);
    const asReader = await pages(reader.pool);
    for (const p of PAGE_ORDER) {
      for (const [key, s] of Object.entries(asReader[p]!.sections))
        expect(s, `${p}.${key}`).toMatchObject({ ok: true });
    }
    type Q = { examples: unknown[] }[];
    const ownerQ = asOwner.health!.sections.quarantine!.data as Q;
    const readerQ = asReader.health!.sections.quarantine!.data as Q;
    expect(ownerQ.some((c) => c.examples.length > 0)).toBe(true);
    expect(readerQ.every((c) => c.examples.length === 0)).toBe(true);
    expect(readerQ.map((c) => ({ ...c, examples: [] }))).toEqual(ownerQ.map((c) => ({ ...c, examples: [] })));
    const strip = (x: Record<string, Api>) => {
      const c = structuredClone(x);
      delete c.health!.sections.quarantine;
      return c;
    };
    // Ages count seconds up to the moment of each read: the reader's, a moment later, may be a
    // second more (a whole minute at most). Compared apart, then set aside.
    const ownerAges: number[] = [];
    const readerAges: number[] = [];
    const owner = withoutAges(strip(asOwner), ownerAges);
    const read = withoutAges(strip(asReader), readerAges);
    expect(read).toEqual(owner);
    expect(readerAges.length).toBe(ownerAges.length);
    expect(ownerAges.length).toBeGreaterThan(0);
    readerAges.forEach((a, i) => {
      expect(a - ownerAges[i]!).toBeGreaterThanOrEqual(0);
      expect(a - ownerAges[i]!).toBeLessThanOrEqual(60);
    });
  });
});
