import type pg from 'pg';

/**
 * A test-only record of what the shared request budget handed out, in the database's own time:
 * what the rate tests assert on. The budget's promise (docs/decisions/0009) is on its grants:
 * at most `limit` in any window of the stored `window_ms` (the tenant's second plus the hold,
 * 1,075 ms), stamped by the database's clock; the simulator's arrival counts are printed, not
 * asserted, because a request delayed in transit lands in the next second and no client controls
 * that.
 *
 * Installed by a test into its own schema, after the migrations: a table, `budget_audit`, and
 * triggers on `rate_budget`, so that no product code changes and every row is written by the
 * database in the statement that leased, gave back or paused (what the database granted, not
 * what a client believes it got). Three triggers, because a lease and a release both rewrite
 * `lease_at`, and only the columns they set tell them apart:
 *
 * - `rate_budget_lease` sets `limit_per_window` (a release never does): the blocks in the new
 *   `lease_at` that the old one lacked are grants, with their database timestamp and count;
 * - a statement that sets `lease_at` and is not a lease is a release (`release(stamp)`): each
 *   block it removed is given back, unused;
 * - `paused_until` set (a Retry-After): a pause, from the statement's database time to its end.
 *
 * Blocks a lease drops because they aged out of the window are neither: they were granted and
 * stay counted. Triggers of one event fire in the order of their names: the lease's runs first
 * and marks its transaction, so that the release trigger knows a lease's rewrite of `lease_at`
 * from a release's (the product never leases and releases in one transaction).
 */

type Db = pg.Pool | pg.Client | pg.PoolClient;

const q = (ident: string) => `"${ident.replaceAll('"', '""')}"`;

/** Creates the audit table in `schema` and its triggers on `rate_budget` (in its internal schema). */
export async function installBudgetAudit(db: Db, schema: string): Promise<void> {
  const s = q(schema);
  await db.query(`
    create table ${s}.budget_audit (
      id bigserial primary key,
      name text not null,
      kind text not null check (kind in ('grant', 'release', 'pause')),
      -- grant and release: the block's stamp (lease_at); pause: when it was set
      at timestamptz not null,
      -- grant and release: the block's count (lease_n)
      n integer not null default 0,
      -- grant: the limit and window the lease counted it against; pause: null
      limit_per_window integer,
      window_ms integer,
      -- pause: no grant before this
      until timestamptz
    );
    create function ${s}.budget_audit_lease() returns trigger language plpgsql as $$
    begin
      perform set_config('crs_budget_audit.leasing', txid_current()::text, true);
      insert into ${s}.budget_audit (name, kind, at, n, limit_per_window, window_ms)
        select new.name, 'grant', b.at, b.n, new.limit_per_window, new.window_ms
          from unnest(new.lease_at, new.lease_n) as b(at, n)
         where tg_op = 'INSERT' or not (b.at = any(old.lease_at));
      return null;
    end $$;
    create function ${s}.budget_audit_release() returns trigger language plpgsql as $$
    begin
      if current_setting('crs_budget_audit.leasing', true) is not distinct from txid_current()::text then
        return null;
      end if;
      insert into ${s}.budget_audit (name, kind, at, n)
        select old.name, 'release', b.at, b.n
          from unnest(old.lease_at, old.lease_n) as b(at, n)
         where not (b.at = any(new.lease_at));
      return null;
    end $$;
    create function ${s}.budget_audit_pause() returns trigger language plpgsql as $$
    begin
      if new.paused_until is not null
         and (tg_op = 'INSERT' or new.paused_until is distinct from old.paused_until) then
        insert into ${s}.budget_audit (name, kind, at, until)
          values (new.name, 'pause', new.updated_at, new.paused_until);
      end if;
      return null;
    end $$;
    create trigger budget_audit_1_lease after insert or update of limit_per_window on ${q(`${schema}_internal`)}.rate_budget
      for each row execute function ${s}.budget_audit_lease();
    create trigger budget_audit_2_release after update of lease_at on ${q(`${schema}_internal`)}.rate_budget
      for each row execute function ${s}.budget_audit_release();
    create trigger budget_audit_3_pause after insert or update of paused_until on ${q(`${schema}_internal`)}.rate_budget
      for each row execute function ${s}.budget_audit_pause();
  `);
}

/** What the budget `name` granted, as its audit recorded it. */
export interface BudgetGrants {
  /** Grants leased, before any was given back. */
  leased: number;
  /** Grants given back unused (blocks that reached their worker too late). */
  released: number;
  /** Grants that stayed granted: no request may start without one. */
  net: number;
  /** Blocks that stayed granted. */
  blocks: number;
  /** The lowest limit and the window the leases counted against (null before any lease). */
  limit: number | null;
  windowMs: number | null;
  /** The most grants kept in any window of `windowMs` of database time, the window's end included. */
  maxInWindow: number;
}

/**
 * Grants of the budget `name`; `maxInWindow` over windows of `windowMs` (default: the stored
 * window, the one the database promises the limit in). A released block is left out of every
 * window: the database let another lease take its place, and no request started with it.
 */
export async function budgetGrants(
  db: Db,
  schema: string,
  name: string,
  windowMs?: number,
): Promise<BudgetGrants> {
  const s = q(schema);
  const { rows } = await db.query<{
    leased: string | null;
    released: string | null;
    blocks: string;
    limit: number | null;
    window_ms: number | null;
  }>(
    `with g as (select * from ${s}.budget_audit where name = $1 and kind = 'grant'),
          r as (select * from ${s}.budget_audit where name = $1 and kind = 'release')
     select (select sum(n) from g) as leased,
            (select sum(n) from r) as released,
            (select count(*) from g where not exists (select 1 from r where r.at = g.at)) as blocks,
            (select min(limit_per_window) from g) as limit,
            (select max(window_ms) from g) as window_ms`,
    [name],
  );
  const r = rows[0]!;
  const win = windowMs ?? r.window_ms ?? 0;
  if (!(Number.isFinite(win) && win >= 1)) throw new Error(`budgetGrants: no window to count in (${win})`);
  // (at - window, at]: what the lease counts (`lease_at > t - window`); timestamps are to the µs.
  const { rows: peak } = await db.query<{ max: string | null }>(
    `select max(w) as max from (
       select sum(g.n) over (order by g.at range between interval '${Math.round(win * 1000) - 1} microseconds' preceding and current row) as w
         from ${s}.budget_audit g
        where g.name = $1 and g.kind = 'grant'
          and not exists (select 1 from ${s}.budget_audit r where r.name = $1 and r.kind = 'release' and r.at = g.at)
     ) as windows`,
    [name],
  );
  const leased = Number(r.leased ?? 0);
  const released = Number(r.released ?? 0);
  return {
    leased,
    released,
    net: leased - released,
    blocks: Number(r.blocks),
    limit: r.limit,
    windowMs: r.window_ms,
    maxInWindow: Number(peak[0]?.max ?? 0),
  };
}

/** Pauses (Retry-After) the budget recorded, in database time, and the grants leased during each. */
export async function budgetPauses(
  db: Db,
  schema: string,
  name: string,
): Promise<Array<{ at: Date; until: Date; lengthMs: number; grantsDuring: number; grantsAfter: number }>> {
  const s = q(schema);
  const { rows } = await db.query<{ at: Date; until: Date; ms: number; during: string; after: string }>(
    `select p.at, p.until, extract(epoch from p.until - p.at)::float8 * 1000 as ms,
            (select count(*) from ${s}.budget_audit g
              where g.name = p.name and g.kind = 'grant' and g.at >= p.at and g.at < p.until) as during,
            (select count(*) from ${s}.budget_audit g
              where g.name = p.name and g.kind = 'grant' and g.at >= p.until) as after
       from ${s}.budget_audit p
      where p.name = $1 and p.kind = 'pause'
      order by p.at`,
    [name],
  );
  return rows.map((r) => ({
    at: r.at,
    until: r.until,
    // In SQL: a Date keeps whole milliseconds only.
    lengthMs: r.ms,
    grantsDuring: Number(r.during),
    grantsAfter: Number(r.after),
  }));
}

/** Arrivals per whole second, as one line to print (never to assert on: see the top of this file). */
export function arrivalsLine(perSecond: Record<string, number>, since: Record<string, number> = {}): string {
  return Object.entries(perSecond)
    .map(([s, n]) => [s, n - (since[s] ?? 0)] as const)
    .filter(([, n]) => n > 0)
    .map(([s, n]) => `${s.slice(-3)}:${n}`)
    .join(' ');
}
