import type pg from 'pg';

/**
 * A large warehouse written straight into the raw tables with generate_series, for bench:bi: the
 * loader would take hours for 10M rows on this machine, and what bench:bi measures (queries,
 * rollup rebuild and refresh) depends on the rows, not on how they arrived.
 *
 * Shape (per message i of n, over `days` days ending `lastDay`): 8 messages per thread, written in
 * a burst of seconds (a thread lives within a day or two); each thread belongs to one of `users`
 * users, spread by a multiplicative hash; 2% blank responses (cancelled), one in 97 assistant
 * entries is "User cancelled", 0.5% of rows soft-deleted. Per message: one assistant history
 * entry with the same message id, 1.0 citations on average (0, 1 or 2) from a skewed set of
 * 3,000 sources, each of one of 5 types, and one artifact per 20 messages. Ids are sequential in their
 * (hex) text so the primary keys are built by appending, as they would be after a long history.
 */

export interface BiShape {
  rows: number;
  days: number;
  users: number;
  lastDay: string;
  /**
   * Every this many threads belong to user 0, besides its hashed share: one heavy user of about
   * 1/heavyEvery of the rows (bench/forget-scale.ts erases it). Unset: users evenly spread.
   */
  heavyEvery?: number;
}

export const MESSAGES_PER_THREAD = 8;

/** uuid(prefix, n): a uuid whose last 12 hex digits are n. */
const id = (prefix: string, n: string) =>
  `('${prefix}-0000-4000-8000-' || lpad(to_hex(${n}), 12, '0'))::uuid`;
const MID = (i: string) => id('00000000', i);
const TID = (i: string) => id('10000000', `(${i}) / ${MESSAGES_PER_THREAD}`);
/** The user of thread `j`: spread by a multiplicative hash, or user 0 for the heavy user's threads. */
const userOf = (j: string, s: BiShape) =>
  s.heavyEvery
    ? `case when (${j}) % ${s.heavyEvery} = 0 then 0 else ((${j}) * 2654435761::bigint) % ${s.users} end`
    : `((${j}) * 2654435761::bigint) % ${s.users}`;
const UID = (i: string, s: BiShape) => id('20000000', userOf(`(${i}) / ${MESSAGES_PER_THREAD}`, s));

function firstDay(s: BiShape): string {
  const d = new Date(`${s.lastDay}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() - s.days + 1);
  return d.toISOString().slice(0, 10);
}

/** Seconds between consecutive messages. */
const step = (s: BiShape) => (s.days * 86400) / s.rows;

const INDEXED = ['analytics_messages', 'threads', 'thread_messages', 'citations', 'artifacts'];

/**
 * Writes the raw tables of an empty, migrated schema (the client's search_path) with triggers
 * off (the rollups are rebuilt afterwards, timed), secondary indexes dropped while writing and
 * created again after. `chunk` messages per statement; `onProgress` after each.
 */
export async function generateWarehouse(
  c: pg.ClientBase,
  s: BiShape,
  onProgress: (what: string) => void,
  chunk = 1_000_000,
): Promise<void> {
  await c.query(`set session_replication_role = replica`);
  await c.query('set statement_timeout = 0');
  await c.query(`set timezone = 'UTC'`);
  const idx = await c.query<{ indexname: string; indexdef: string }>(
    `select i.indexname, i.indexdef from pg_indexes i
     where i.schemaname = current_schema() and i.tablename = any($1)
       and not exists (select 1 from pg_constraint k where k.conname = i.indexname)`,
    [INDEXED],
  );
  for (const r of idx.rows) await c.query(`drop index ${r.indexname}`);

  const start = firstDay(s);
  const t = (i: string) => `('${start}'::timestamptz + (${i}) * ${step(s)} * interval '1 second')`;
  for (let a = 0; a < s.rows; a += chunk) {
    const b = Math.min(s.rows, a + chunk) - 1;
    await c.query(
      `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input,
         response, extra, record_hash, line_hash, response_chars, _source_line, _load_id, _deleted_at)
       select ${MID('i')}, ${TID('i')}, ${UID('i', s)}, x.t, (x.t at time zone 'UTC')::date,
              'question ' || i, x.r, null, md5(i::text), null, length(btrim(x.r, E' \\t\\n\\r\\f\\x0B')), i,
              'bench-bi', case when i % 200 = 7 then now() end
       from generate_series(${a}::bigint, ${b}::bigint) i
       cross join lateral (select ${t('i')} as t,
         case when i % 50 = 0 then '' else repeat('answer text ', 1 + ((i * 7919) % 40)::int) end as r) x`,
    );
    await c.query(
      `insert into thread_messages (message_id, thread_id, position, role, text, created_at, is_cancelled, raw, _load_id)
       select ${MID('i')}, ${TID('i')}, ((i % ${MESSAGES_PER_THREAD}) * 2 + 1)::int, 'assistant', null, ${t('i')},
              i % 97 = 0, '{}'::jsonb, 'bench-bi'
       from generate_series(${a}::bigint, ${b}::bigint) i`,
    );
    // Ordinal 0 for three messages in four, ordinal 1 too for one in four: 1.0 per message.
    await c.query(
      `insert into citations (owner_kind, owner_id, ordinal, message_id, artifact_id, thread_id, citation_type,
         name, last_updated_at, is_snippet, _load_id)
       select 'message', ${MID('i')}::text, y.o, ${MID('i')}, null, ${TID('i')},
              (array['web', 'custom_doc', 'data_set', 'news', 'paper'])[1 + (z.k % 5)], 'Source ' || z.k,
              '${start}'::timestamptz + ((i * 7 + y.o) % 365) * interval '1 day', false, 'bench-bi'
       from generate_series(${a}::bigint, ${b}::bigint) i
       cross join lateral (select 0 as o where i % 4 <> 3 union all select 1 where i % 4 = 0) y
       cross join lateral (
         select floor(3000 * power(((i * 2654435761::bigint + y.o * 40503) % 1000003) / 1000003.0, 3))::int as k) z`,
    );
    await c.query(
      `insert into artifacts (artifact_id, thread_id, message_id, output_type, title, raw, fetched_via, _load_id)
       select 'art-' || i, ${TID('i')}, ${MID('i')}, 'report', 'Report ' || i, '{}'::jsonb, 'v2', 'bench-bi'
       from generate_series(${a}::bigint, ${b}::bigint) i where i % 20 = 0`,
    );
    onProgress(`${b + 1}/${s.rows} messages`);
  }
  const threads = Math.ceil(s.rows / MESSAGES_PER_THREAD);
  await c.query(
    `insert into threads (thread_id, thread_name, user_id, first_message_at, last_message_at, message_count,
       enrich_status, enrich_requested_at, enriched_at, history_count, _load_id)
     select ${id('10000000', 'j')}, 'Thread ' || j, ${id('20000000', userOf('j', s))},
            ${t(`j * ${MESSAGES_PER_THREAD}`)}, ${t(`j * ${MESSAGES_PER_THREAD} + ${MESSAGES_PER_THREAD - 1}`)},
            ${MESSAGES_PER_THREAD},
            case when j % 100 = 0 then 'pending' when j % 333 = 0 then 'failed' else 'done' end,
            now(), now(), ${MESSAGES_PER_THREAD * 2}, 'bench-bi'
     from generate_series(0::bigint, ${threads - 1}::bigint) j`,
  );
  onProgress(`${threads} threads`);
  // A ledger of complete days, for sync_health and the dashboard's health page.
  await c.query(
    `insert into sync_days (day, status, rows_read, rows_inserted, finished_at, started_at, _load_id, lines_committed)
     select d::date, 'complete', ${Math.round(s.rows / s.days)}, ${Math.round(s.rows / s.days)}, now(), now(), 'bench-bi', 0
     from generate_series('${start}'::date, '${s.lastDay}'::date, interval '1 day') d`,
  );
  for (const r of idx.rows) {
    onProgress(`index ${r.indexname}`);
    await c.query(r.indexdef);
  }
  await c.query('set session_replication_role = origin');
  for (const table of [...INDEXED, 'sync_days']) {
    onProgress(`vacuum analyze ${table}`);
    await c.query(`vacuum analyze ${table}`);
  }
}
