import { type Kysely, sql } from 'kysely';

/**
 * The range rollups move into the per-day rollups they were copied from
 * (docs/decisions/0010-rollups-and-partitioning.md, "Upkeep").
 *
 * `rollup_thread_days` and `rollup_user_days` held, for each day a thread or user was active, the
 * previous active day (and for threads the status and depth bucket): one more row, and two more
 * index entries, for every row of `rollup_thread_daily` and `rollup_user_daily`, written by every
 * refresh. Those columns now live on the per-day rows themselves:
 *
 * - `rollup_thread_daily` gets `prev_date`, `status` and `depth`. Its rows are per thread, day and
 *   user (a thread is written by one user as a rule, but the export does not promise it), so
 *   `prev_date` is the previous row of the thread in (day, user) order: on a thread's second
 *   user's row of a day it is that same day, which keeps "previous day before the range" true of
 *   exactly one row per thread and range. Its keys become (thread_id, message_date, user_id),
 *   which also serves the lookups by thread, and one index by day serves every range read.
 * - `rollup_user_daily` gets `prev_date`. Its keys become (user_id, message_date), which was its
 *   second index; the covering index by day carries `prev_date` too, and a partial index keeps
 *   each user's first day.
 *
 * The tables are copied, not altered in place: an update of every row would write each row and
 * index entry twice. Status and depth come from `threads` and `rollup_threads` as they are; a
 * thread marked for the refresh is recomputed by it.
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table rollup_thread_daily rename to rollup_thread_daily_old`.execute(db);
  await sql`alter index rollup_thread_daily_pkey rename to rollup_thread_daily_old_pkey`.execute(db);
  await sql`
    create table rollup_thread_daily (
      thread_id uuid not null,
      message_date date not null,
      user_id uuid not null,
      messages bigint not null,
      first_at timestamptz not null,
      last_at timestamptz not null,
      prev_date date,
      status text,
      depth smallint not null
    )`.execute(db);
  await sql`
    insert into rollup_thread_daily
    select d.thread_id, d.message_date, d.user_id, d.messages, d.first_at, d.last_at,
           lag(d.message_date) over (partition by d.thread_id order by d.message_date, d.user_id),
           t.enrich_status,
           case when coalesce(s.history_entries, 0) = 0 then 0 when s.history_entries <= 2 then 1
                when s.history_entries <= 5 then 2 when s.history_entries <= 10 then 3
                when s.history_entries <= 20 then 4 else 5 end
    from rollup_thread_daily_old d
    left join threads t on t.thread_id = d.thread_id
    left join rollup_threads s on s.thread_id = d.thread_id`.execute(db);
  await sql`drop table rollup_thread_daily_old`.execute(db);
  await sql`drop table rollup_thread_days`.execute(db);
  await sql`alter table rollup_thread_daily add primary key (thread_id, message_date, user_id)`.execute(db);
  // Every read of a range: the distinct threads and the breakdown (index-only), each day's threads
  // by messages for the top list (ties by id), the refresh's reads of a day's rows.
  await sql`
    create index rollup_thread_daily_date_idx on rollup_thread_daily (message_date, messages desc, thread_id)
    include (prev_date, status, depth)`.execute(db);

  await sql`alter table rollup_user_daily rename to rollup_user_daily_old`.execute(db);
  await sql`alter index rollup_user_daily_pkey rename to rollup_user_daily_old_pkey`.execute(db);
  await sql`drop index rollup_user_daily_date_cover_idx`.execute(db);
  await sql`
    create table rollup_user_daily (
      user_id uuid not null,
      message_date date not null,
      messages bigint not null,
      threads bigint not null,
      first_at timestamptz not null,
      last_at timestamptz not null,
      prev_date date
    )`.execute(db);
  await sql`
    insert into rollup_user_daily
    select user_id, message_date, messages, threads, first_at, last_at,
           lag(message_date) over (partition by user_id order by message_date)
    from rollup_user_daily_old`.execute(db);
  await sql`drop table rollup_user_daily_old`.execute(db);
  await sql`drop table rollup_user_days`.execute(db);
  await sql`alter table rollup_user_daily add primary key (user_id, message_date)`.execute(db);
  // The distinct users of a range and the top users' sums: index-only reads of the range's rows
  // (a day's rows lie all over the heap).
  await sql`
    create index rollup_user_daily_date_idx on rollup_user_daily (message_date)
    include (user_id, messages, prev_date)`.execute(db);
  // Ranges that start with the data count first days ever: one entry per user.
  await sql`create index rollup_user_daily_first_idx on rollup_user_daily (message_date) where prev_date is null`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  // Going back rebuilds the copies from the per-day rows.
  await sql`
    create table rollup_thread_days (
      thread_id uuid not null,
      message_date date not null,
      prev_date date,
      messages bigint not null,
      status text,
      depth smallint not null,
      primary key (thread_id, message_date)
    )`.execute(db);
  await sql`
    insert into rollup_thread_days
    select thread_id, message_date, lag(message_date) over (partition by thread_id order by message_date),
           messages, status, depth
    from (select thread_id, message_date, sum(messages) as messages, min(status) as status, min(depth) as depth
          from rollup_thread_daily group by 1, 2) d`.execute(db);
  await sql`
    create index rollup_thread_days_date_idx on rollup_thread_days (message_date, messages desc, thread_id)
    include (prev_date, status, depth)`.execute(db);
  await sql`drop index rollup_thread_daily_date_idx`.execute(db);
  await sql`alter table rollup_thread_daily drop constraint rollup_thread_daily_pkey`.execute(db);
  await sql`alter table rollup_thread_daily drop column prev_date, drop column status, drop column depth`.execute(
    db,
  );
  await sql`alter table rollup_thread_daily add primary key (message_date, thread_id, user_id)`.execute(db);
  await sql`create index rollup_thread_daily_thread_idx on rollup_thread_daily (thread_id)`.execute(db);

  await sql`
    create table rollup_user_days (
      user_id uuid not null,
      message_date date not null,
      prev_date date,
      primary key (user_id, message_date)
    )`.execute(db);
  await sql`insert into rollup_user_days select user_id, message_date, prev_date from rollup_user_daily`.execute(
    db,
  );
  await sql`create index rollup_user_days_date_idx on rollup_user_days (message_date) include (prev_date)`.execute(
    db,
  );
  await sql`create index rollup_user_days_first_idx on rollup_user_days (message_date) where prev_date is null`.execute(
    db,
  );
  await sql`drop index rollup_user_daily_first_idx`.execute(db);
  await sql`drop index rollup_user_daily_date_idx`.execute(db);
  await sql`alter table rollup_user_daily drop constraint rollup_user_daily_pkey`.execute(db);
  await sql`alter table rollup_user_daily drop column prev_date`.execute(db);
  await sql`alter table rollup_user_daily add primary key (message_date, user_id)`.execute(db);
  await sql`create index rollup_user_daily_user_idx on rollup_user_daily (user_id, message_date)`.execute(db);
  await sql`
    create index rollup_user_daily_date_cover_idx on rollup_user_daily (message_date) include (user_id, messages)`.execute(
    db,
  );
}
