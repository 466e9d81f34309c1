import { type Kysely, sql } from 'kysely';

/**
 * One request budget for every worker of a deployment (src/api/shared-budget.ts leases from it).
 *
 * `rate_budget` holds one row per budget (normally one: the tenant's). `lease_at`/`lease_n` are
 * the blocks of grants leased within the last window, oldest first, stamped with the database's
 * clock (`clock_timestamp()`), never a worker's: workers' clocks may disagree, the database's
 * row lock orders every lease. `paused_until` is set from a service's Retry-After; no grant is
 * leased before it.
 *
 * `rate_budget_lease` is the whole protocol in one call: lock the row, drop blocks older than
 * the window, grant up to `p_want` of what the window has left, append the block, and say how
 * long until more is free (or until the pause ends). A worker that dies holding a block loses
 * nothing for longer than one window: its block ages out like any other. `stamp` names the block
 * (its time as text, to the microsecond), so that a worker whose lease came back too late to use
 * can give it back at once.
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table rate_budget (
      name text primary key,
      lease_at timestamptz[] not null default '{}',
      lease_n integer[] not null default '{}',
      paused_until timestamptz,
      -- the last lease's limit and window, for operators (each worker passes its own)
      limit_per_window integer,
      window_ms integer,
      updated_at timestamptz not null default clock_timestamp()
    )`.execute(db);
  await sql`
    create function rate_budget_lease(p_name text, p_limit integer, p_window_ms integer, p_want integer)
      returns table (granted integer, wait_ms integer, paused_ms integer, stamp text)
      language plpgsql
      set search_path from current
    as $$
    declare
      t timestamptz;
      r rate_budget%rowtype;
      keep_at timestamptz[] := '{}';
      keep_n integer[] := '{}';
      used integer := 0;
      take integer;
      i integer;
      win interval := make_interval(secs => p_window_ms / 1000.0);
    begin
      insert into rate_budget (name) values (p_name) on conflict (name) do nothing;
      select * into r from rate_budget b where b.name = p_name for update;
      -- the clock is read after the lock: a lease that waited is stamped when it is granted
      t := clock_timestamp();
      if r.paused_until is not null and r.paused_until > t then
        return query select 0, 0, ceil(extract(epoch from (r.paused_until - t)) * 1000)::integer, null::text;
        return;
      end if;
      for i in 1 .. coalesce(array_length(r.lease_at, 1), 0) loop
        if r.lease_at[i] > t - win then
          keep_at := keep_at || r.lease_at[i];
          keep_n := keep_n || r.lease_n[i];
          used := used + r.lease_n[i];
        end if;
      end loop;
      take := greatest(0, least(p_want, p_limit - used));
      if take > 0 then
        keep_at := keep_at || t;
        keep_n := keep_n || take;
      end if;
      update rate_budget b
         set lease_at = keep_at, lease_n = keep_n, limit_per_window = p_limit,
             window_ms = p_window_ms, updated_at = t
       where b.name = p_name;
      if used + take < p_limit or array_length(keep_at, 1) is null then
        return query select take, 0, 0, t::text;
      else
        -- full: more is free when the oldest block leaves the window
        return query select take,
          greatest(1, ceil(extract(epoch from (keep_at[1] + win - t)) * 1000))::integer, 0, t::text;
      end if;
    end
    $$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop function if exists rate_budget_lease(text, integer, integer, integer)`.execute(db);
  await sql`drop table if exists rate_budget`.execute(db);
}
