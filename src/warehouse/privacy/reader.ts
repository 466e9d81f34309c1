import { CrsError } from '../../errors.ts';
import { internalSchema, type Warehouse } from '../db.ts';

/**
 * `crs-sync grant-reader ROLE`: read access to the data schema (its tables and views, now and as
 * later migrations add them) and nothing of the internal one (the bookkeeping and the
 * quarantine, migration 2026-11-28T21-00-00). The default privileges are those of the role that
 * runs this, which must be the role that runs the migrations: tables it creates later are
 * readable too.
 */
export async function grantReader(w: Warehouse, role: string): Promise<{ schema: string; internal: string }> {
  const c = await w.pool.connect();
  try {
    const found = await c.query<{ ok: boolean; name: string }>(
      'select true as ok, quote_ident(rolname) as name from pg_roles where rolname = $1',
      [role],
    );
    const who = found.rows[0];
    if (!who)
      throw new CrsError(
        'USAGE',
        `role ${JSON.stringify(role)} does not exist: create it first (create role ${JSON.stringify(role)} login password '…')`,
      );
    const q = (
      await c.query<{ s: string; i: string }>('select quote_ident($1) as s, quote_ident($2) as i', [
        w.schema,
        internalSchema(w.schema),
      ])
    ).rows[0] as { s: string; i: string };
    await c.query('begin');
    await c.query(`grant usage on schema ${q.s} to ${who.name}`);
    await c.query(`grant select on all tables in schema ${q.s} to ${who.name}`);
    await c.query(`alter default privileges in schema ${q.s} grant select on tables to ${who.name}`);
    // Whatever it may have been given by hand before: the internal schema is not for readers.
    await c.query(`revoke all on schema ${q.i} from ${who.name}`);
    await c.query(`revoke all on all tables in schema ${q.i} from ${who.name}`);
    await c.query('commit');
    return { schema: w.schema, internal: internalSchema(w.schema) };
  } catch (err) {
    await c.query('rollback').catch(() => {});
    throw err;
  } finally {
    c.release();
  }
}
