import { type Kysely, sql } from 'kysely';

/**
 * One limit per shared request budget. As first written, `rate_budget_lease` counted each lease
 * against the limit its caller passed, so workers with different CRS_RATE_LIMIT_RPS shared the
 * highest of them, and a window of 0 ms kept no block at all: no limit.
 *
 * `rate_budget_request` remembers the limits (per window) the budget's callers asked for, with
 * when each was last asked; a limit not asked for in 10 minutes is forgotten (its worker stopped,
 * or was reconfigured; its row stays, one per distinct setting). A lease counts against one limit: the lowest rate asked for, unless a
 * caller passed `p_fixed` (CRS_RATE_BUDGET_RPS, set for the deployment), and then the lowest of
 * the fixed ones, whatever the others ask. A limit or window below 1 is an error, never "no limit".
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table rate_budget_request (
      name text not null,
      limit_per_window integer not null,
      window_ms integer not null,
      fixed boolean not null,
      asked_at timestamptz not null,
      primary key (name, fixed, limit_per_window, window_ms)
    )`.execute(db);
  await sql`drop function rate_budget_lease(text, integer, integer, integer)`.execute(db);
  await sql`
    create function rate_budget_lease(p_name text, p_limit integer, p_window_ms integer, p_want integer,
                                      p_fixed boolean default false)
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
      eff_limit integer;
      eff_window_ms integer;
      win interval;
    begin
      if p_limit is null or p_limit < 1 or p_window_ms is null or p_window_ms < 1 then
        raise exception 'rate_budget_lease: the limit (%) and the window (% ms) must be at least 1', p_limit, p_window_ms
          using errcode = '22023';
      end if;
      insert into rate_budget (name) values (p_name) on conflict (name) do nothing;
      select * into r from rate_budget b where b.name = p_name for update;
      -- the clock is read after the lock: a lease that waited is stamped when it is granted
      t := clock_timestamp();
      -- written at most once a second per distinct request: a lease stays one row update mostly
      insert into rate_budget_request as q (name, limit_per_window, window_ms, fixed, asked_at)
        values (p_name, p_limit, p_window_ms, coalesce(p_fixed, false), t)
        on conflict (name, fixed, limit_per_window, window_ms)
        do update set asked_at = excluded.asked_at where q.asked_at < excluded.asked_at - interval '1 second';
      select q.limit_per_window, q.window_ms into eff_limit, eff_window_ms
        from rate_budget_request q
       where q.name = p_name and q.asked_at > t - interval '10 minutes'
       order by q.fixed desc, q.limit_per_window::numeric / q.window_ms, q.window_ms desc
       limit 1;
      -- the caller's own request was just written (or is less than a second old)
      eff_limit := coalesce(eff_limit, p_limit);
      eff_window_ms := coalesce(eff_window_ms, p_window_ms);
      win := make_interval(secs => eff_window_ms / 1000.0);
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
      take := greatest(0, least(p_want, eff_limit - used));
      if take > 0 then
        keep_at := keep_at || t;
        keep_n := keep_n || take;
      end if;
      update rate_budget b
         set lease_at = keep_at, lease_n = keep_n, limit_per_window = eff_limit,
             window_ms = eff_window_ms, updated_at = t
       where b.name = p_name;
      if used + take < eff_limit or array_length(keep_at, 1) is null then
        return query select take, 0, 0, t::text;
      else
        -- full: more is free when the oldest block leaves the window
        return query select take,
          greatest(1, ceil(extract(epoch from (keep_at[1] + win - t)) * 1000))::integer, 0, t::text;
      end if;
    end
    $$`.execute(db);
}

/** Back to the function as first written (each lease against its caller's own limit). */
export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop function if exists rate_budget_lease(text, integer, integer, integer, boolean)`.execute(db);
  await sql`drop table if exists rate_budget_request`.execute(db);
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
