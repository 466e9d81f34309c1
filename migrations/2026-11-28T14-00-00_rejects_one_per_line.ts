import { type Kysely, sql } from 'kysely';

/**
 * One open reject per quarantined line, however many loads read it.
 *
 * Until now a reject was unique per load and line number, and every load has its own id: an
 * intraday pull every 15 minutes quarantined the same bad line again 96 times a day, and each
 * import of the same file once more. An export or file line is now known by its source, its day
 * and `line_digest` (the SHA-256 of its exact bytes; of an over-long line, kept only as a prefix,
 * of that prefix, a NUL byte, its whole length in decimal digits, a NUL byte and its message id:
 * src/ingest/merge/pending.ts `rejectDigest`). While such a reject is open (not replayed), a later load that reads the line
 * updates it: `times_seen` counts the loads that read it, `last_load_id` and `last_seen_at` say
 * which read it last; `_load_id`, `line_no` and `received_at` stay those of the first. A replayed
 * reject is closed: the line seen again after it opens a new one.
 *
 * - `load_day_counts.rows_rejected`: a load's quarantined lines per day, committed with its
 *   checkpoint like its other counts; the quarantine can no longer say which lines a load read.
 *   Filled for the loads whose rejects are here, so a load that resumes across this migration
 *   counts them.
 * - Existing export and file rejects get their digest, computed as the loader does; the open ones
 *   of one line are merged into the oldest (its id, first load, line and time kept), with the
 *   number of loads that read it and the last of them and its time, error and detail.
 * - `last_load_id` is filled by a trigger when an insert leaves it out (a history or artifact
 *   reject, each read its own row; a worker of the previous release during an upgrade, whose
 *   rows carry no digest and stay rows of their own).
 *
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table load_day_counts add column rows_rejected bigint not null default 0`.execute(db);
  await sql`
    insert into load_day_counts (load_key, part, day, rows_rejected)
    select c.load_key, (r.line_no % c.parts)::int, r.day, count(*)
    from rejected_records r
    join (select distinct load_key, parts from load_checkpoints) c
      on c.load_key = case when r.source = 'export' then r._load_id || ':' || to_char(r.day, 'YYYY-MM-DD')
                           else r._load_id end
    where r.source in ('export', 'file') and r.line_no is not null and r.day is not null
    group by 1, 2, 3
    on conflict (load_key, part, day) do update set rows_rejected = excluded.rows_rejected`.execute(db);

  await sql`
    alter table rejected_records
      add column line_digest bytea,
      add column times_seen bigint not null default 1,
      add column last_load_id text,
      add column last_seen_at timestamptz not null default now()`.execute(db);
  await sql`
    update rejected_records set
      last_load_id = _load_id,
      last_seen_at = received_at,
      line_digest = case
        when source not in ('export', 'file') or line_no is null then null
        when error_code = 'line_too_long' then
          sha256(coalesce(raw_bytes, convert_to(raw, 'UTF8')) || '\\x00'::bytea
            || convert_to(coalesce(raw_length, 0)::text, 'UTF8') || '\\x00'::bytea
            || convert_to(coalesce(message_id::text, ''), 'UTF8'))
        else sha256(coalesce(raw_bytes, convert_to(raw, 'UTF8'))) end`.execute(db);

  await sql`
    create temporary table crs_reject_lines on commit drop as
    select min(id) as keep, count(distinct _load_id) as loads,
           (array_agg(_load_id order by received_at desc, id desc))[1] as last_load_id,
           max(received_at) as last_seen_at,
           (array_agg(error_code order by received_at desc, id desc))[1] as error_code,
           (array_agg(error_detail order by received_at desc, id desc))[1] as error_detail,
           source, coalesce(day, 'infinity'::date) as day_key, line_digest
    from rejected_records
    where line_digest is not null and replayed_at is null
    group by source, coalesce(day, 'infinity'::date), line_digest
    having count(*) > 1`.execute(db);
  await sql`
    update rejected_records r set times_seen = g.loads, last_load_id = g.last_load_id,
      last_seen_at = g.last_seen_at, error_code = g.error_code, error_detail = g.error_detail
    from crs_reject_lines g where r.id = g.keep`.execute(db);
  await sql`
    delete from rejected_records r using crs_reject_lines g
    where r.line_digest = g.line_digest and r.source = g.source
      and coalesce(r.day, 'infinity'::date) = g.day_key and r.replayed_at is null and r.id <> g.keep`.execute(
    db,
  );

  await sql`alter table rejected_records alter column last_load_id set not null`.execute(db);
  await sql`
    create function rejected_records_last_load() returns trigger language plpgsql as $$
    begin
      new.last_load_id := coalesce(new.last_load_id, new._load_id);
      return new;
    end $$`.execute(db);
  await sql`
    create trigger rejected_records_last_load before insert on rejected_records
    for each row execute function rejected_records_last_load()`.execute(db);
  // The loader's upsert names this index (src/warehouse/load/batch.ts); a real day is never 'infinity'.
  await sql`
    create unique index rejected_records_open_line_uq
    on rejected_records (source, coalesce(day, 'infinity'::date), line_digest)
    where line_digest is not null and replayed_at is null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index rejected_records_open_line_uq`.execute(db);
  await sql`drop trigger rejected_records_last_load on rejected_records`.execute(db);
  await sql`drop function rejected_records_last_load()`.execute(db);
  await sql`
    alter table rejected_records
      drop column line_digest, drop column times_seen, drop column last_load_id, drop column last_seen_at`.execute(
    db,
  );
  await sql`alter table load_day_counts drop column rows_rejected`.execute(db);
}
