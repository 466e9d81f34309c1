import type pg from 'pg';
import { CrsError } from '../../errors.ts';
import { type Queryable, rowsOf } from '../read/queryable.ts';
import { refreshRollups } from '../rollups/refresh.ts';
import { eraseRollupsAfter, eraseRollupsBefore, KEPT_ERASED } from './forget-rollups.ts';
import { canonicalId, type ErasedKind, keyedId, privacyKey, uuidsIn } from './keyed-id.ts';

/** Who to erase: users (and with them every thread of theirs) and single threads. */
export interface ForgetTarget {
  users: readonly string[];
  threads: readonly string[];
}

/** Rows erased (or, in a dry run, that would be) per table, in the order they are erased. */
export type ErasedRows = Record<string, number>;

export interface ForgetResult {
  /** The erasure's id in `privacy_erasures`; undefined in a dry run. */
  erasureId?: number;
  dryRun: boolean;
  users: number;
  /** The named threads and every thread of the named users. */
  threads: number;
  rows: ErasedRows;
  /**
   * Rollup days and threads corrected in the erasure's transaction: the erased threads' rows
   * removed, the days they were active on corrected (forget-rollups.ts), and any day the refresh
   * after it recomputed whole.
   */
  rollups: { days: number; threads: number };
}

/**
 * Every table that holds a person's data, with the rows of the erased ones (`fg_messages`,
 * `fg_threads`, `fg_ids`: the temporary tables `collect` fills). The rollups are not here: the
 * erasure corrects them for the erased threads in the same transaction (forget-rollups.ts), and
 * refreshes what else the raw tables' triggers marked. A quarantined export or file line is found by the ids the loader read from the
 * whole line (`message_id`, `user_id`, `thread_id`: an over-long line keeps only a prefix in
 * `raw`, its ids often beyond it), and by the ids' text too: a line whose ids could not be read
 * (not JSON, an id that is not a UUID), or quarantined before its ids were kept, may still name them.
 */
const ERASED: readonly { table: string; where: string; probe?: boolean }[] = [
  // First: an enrichment page in flight holds its thread's row FOR SHARE (enrich-pages.ts), so
  // this waits for it to commit, and the deletes below see what it wrote.
  { table: 'threads', where: 'thread_id in (select thread_id from fg_threads)' },
  // By thread, as fg_messages was read: a thread's rows lie together, its message ids do not.
  { table: 'analytics_messages', where: 'thread_id in (select thread_id from fg_threads)' },
  // `probe`: planned as lookups by key. The delete trigger's statement looks up the export row of
  // each "User cancelled" entry that goes: planned as a hash join, it read every export row
  // (1.1 s of a 2M-row warehouse's 100k entries, 11 s at 10M); by key, 90 ms.
  { table: 'thread_messages', where: 'thread_id in (select thread_id from fg_threads)', probe: true },
  { table: 'citations', where: 'thread_id in (select thread_id from fg_threads)' },
  { table: 'artifacts', where: 'thread_id in (select thread_id from fg_threads)' },
  {
    table: 'thread_queue',
    where: 'thread_id in (select thread_id from fg_threads) or user_id in (select id from fg_ids)',
  },
  {
    table: 'rejected_records',
    where: `thread_id in (select thread_id from fg_threads)
            or message_id in (select message_id from fg_messages)
            or user_id in (select id from fg_ids where kind = 'user')
            or id in (select id from fg_rejects)
            or exists (select 1 from fg_ids i
                       where strpos(lower(rejected_records.raw), i.id::text) > 0
                          or position(convert_to(i.id::text, 'UTF8') in rejected_records.raw_bytes) > 0
                          or position(convert_to(upper(i.id::text), 'UTF8') in rejected_records.raw_bytes) > 0)`,
  },
  { table: 'held_deletes', where: 'message_id in (select message_id from fg_messages)' },
  { table: 'load_seen', where: 'message_id in (select message_id from fg_messages)' },
];

function checkedIds(kind: ErasedKind, ids: readonly string[]): string[] {
  const out = new Set<string>();
  for (const id of ids) {
    const c = canonicalId(id);
    // The id itself is not repeated: a mistyped id may be half of a real one.
    if (c === undefined)
      throw new CrsError('USAGE', `--${kind} takes UUIDs; argument ${out.size + 1} is not one`);
    out.add(c);
  }
  return [...out];
}

/** Fills the erasure's temporary tables: the ids named, every thread of the users, every row of both. */
async function collect(c: Queryable, users: string[], threads: string[]): Promise<void> {
  await c.query('create temp table fg_ids (id uuid primary key, kind text not null) on commit drop');
  await c.query('create temp table fg_threads (thread_id uuid primary key) on commit drop');
  await c.query(
    `create temp table fg_messages (message_id uuid primary key, message_date date not null,
       response_chars integer not null, live boolean not null) on commit drop`,
  );
  await c.query(
    `insert into fg_ids select u, 'user' from unnest($1::uuid[]) u
     union select t, 'thread' from unnest($2::uuid[]) t on conflict do nothing`,
    [users, threads],
  );
  await c.query(
    `insert into fg_threads
       select t from unnest($2::uuid[]) t
       union select thread_id from analytics_messages where user_id = any($1::uuid[])
       union select thread_id from threads where user_id = any($1::uuid[])
       union select thread_id from thread_queue where user_id = any($1::uuid[])`,
    [users, threads],
  );
  // Not the threads a user's quarantined lines name: a line is quarantined before its fields are
  // known to be what they claim, and its thread may be another person's (the reject itself goes
  // by its user id).
  // Every thread erased is named in the quarantine's search too (its history rejects name it).
  await c.query(`insert into fg_ids select thread_id, 'thread' from fg_threads on conflict do nothing`);
  // Every row of a named user is in one of their threads, all in fg_threads. With what the
  // rollups' correction takes of each (forget-rollups.ts), so the rows are read once.
  await c.query(
    `insert into fg_messages
       select message_id, message_date, response_chars, _deleted_at is null from analytics_messages
        where thread_id in (select thread_id from fg_threads)`,
  );
  await collectEscapedRejects(c);
  await c.query('analyze fg_ids, fg_threads, fg_messages');
}

/**
 * Quarantined lines that name an erased id only with JSON escapes (`"\u0061bc…"`: the id to
 * JSON.parse and to the service, but not as text to `strpos`), into `fg_rejects`. Lines with an
 * escape are few; they are read and searched here (`uuidsIn`, as the loader drops them).
 */
async function collectEscapedRejects(c: Queryable): Promise<void> {
  await c.query('create temp table fg_rejects (id bigint primary key) on commit drop');
  const ids = new Set((await rowsOf<{ id: string }>(c, 'select id::text from fg_ids')).map((r) => r.id));
  const escaped = await rowsOf<{ id: string; raw: string; b: Buffer | null }>(
    c,
    `select id::text, raw, raw_bytes as b from rejected_records
      where strpos(raw, $1) > 0 or position(convert_to($1, 'UTF8') in raw_bytes) > 0`,
    ['\\u'],
  );
  const named = escaped
    .filter((r) => uuidsIn(r.b ? r.b.toString('latin1') : r.raw).some((id) => ids.has(id)))
    .map((r) => r.id);
  if (named.length > 0) await c.query('insert into fg_rejects select unnest($1::bigint[])', [named]);
}

/**
 * Erases users and threads from every table that holds their data and adds them to the
 * suppression list, in one transaction with the rollups' refresh (under the rollups' lock), so
 * readers see them either whole or gone, and every rollup equals its raw tables after.
 *
 * The suppression list's lock (SHARE ROW EXCLUSIVE) waits for the loads' and enrichment's open
 * transactions, which hold SHARE on it, and keeps new ones out until the erasure commits: rows
 * they wrote before are erased here, rows after are dropped by them (suppression.ts).
 *
 * A dry run counts the same rows in a transaction it rolls back, and takes no lock.
 */
export async function forget(
  pool: pg.Pool,
  target: ForgetTarget,
  opts: {
    reason?: string;
    dryRun?: boolean;
    /** How user ids are stored (CRS_USER_ID_POLICY): the named ids are erased as stored. */
    storedUserId?: ((userId: string) => string) | undefined;
  } = {},
): Promise<ForgetResult> {
  const stored = opts.storedUserId;
  const users = checkedIds('user', target.users).map((u) => (stored ? stored(u) : u));
  const threads = checkedIds('thread', target.threads);
  if (users.length === 0 && threads.length === 0)
    throw new CrsError('USAGE', 'name at least one --user or --thread');
  if (opts.dryRun) return countOnly(pool, users, threads);
  const key = await privacyKey(pool, true);
  if (!key) throw new Error('the deployment has no privacy key (privacy_key) and none could be made');
  let result: ForgetResult | undefined;
  let corrected = { days: 0, threads: 0 };
  const refreshed = await refreshRollups(pool, undefined, {
    first: async (c) => {
      await c.query('lock table privacy_suppressions in share row exclusive mode');
      await collect(c, users, threads);
      // A warehouse flagged for a rebuild has no rollups to correct: the views read the raw tables.
      const state = await c.query<{ rebuild_needed: boolean }>('select rebuild_needed from rollup_state');
      const correct = state.rows[0]?.rebuild_needed === false;
      if (correct) await eraseRollupsBefore(c);
      const rows: ErasedRows = {};
      for (const { table, where, probe } of ERASED) {
        if (probe) await c.query('set local enable_hashjoin = off; set local enable_mergejoin = off');
        // The correction keeps the "User cancelled" entries that go (KEPT_ERASED).
        const kept = correct ? KEPT_ERASED[table] : undefined;
        const r = await c.query<{ n: string }>(
          `with d as (delete from ${table} where ${where} returning ${kept?.returning ?? '1'})
           ${kept ? `, k as (${kept.insert})` : ''}
           select count(*)::text as n from d`,
        );
        rows[table] = Number(r.rows[0]?.n ?? 0);
        if (probe) await c.query('set local enable_hashjoin = on; set local enable_mergejoin = on');
      }
      // A pull that failed (or runs) left marks of the threads it wrote waiting for its finalize:
      // bookkeeping, not data, but it names them. Their day is left marked by the correction
      // below, and refreshed whole with this erasure.
      await c.query(
        'delete from rollup_waiting_threads where thread_id in (select thread_id from fg_threads)',
      );
      if (correct) corrected = await eraseRollupsAfter(c);
      const erasedThreads = Number(
        (await c.query<{ n: string }>('select count(*)::text as n from fg_threads')).rows[0]?.n ?? 0,
      );
      const e = await c.query<{ id: string }>(
        `insert into privacy_erasures (reason, users, threads, rows_erased) values ($1, $2, $3, $4) returning id::text`,
        [opts.reason ?? null, users.length, erasedThreads, JSON.stringify(rows)],
      );
      const erasureId = Number(e.rows[0]?.id);
      const all = (await c.query<{ id: string; kind: ErasedKind }>('select id::text, kind from fg_ids')).rows;
      await c.query(
        `insert into privacy_suppressions (kind, key_hash, erasure_id)
           select * from unnest($1::text[], $2::bytea[]) k(kind, key_hash), (select $3::bigint) e on conflict do nothing`,
        [all.map((x) => x.kind), all.map((x) => keyedId(key, x.kind, x.id)), erasureId],
      );
      result = {
        erasureId,
        dryRun: false,
        users: users.length,
        threads: erasedThreads,
        rows,
        rollups: { days: 0, threads: 0 },
      };
    },
  });
  if (!result) throw new Error('the erasure did not run');
  result.rollups = { days: corrected.days + refreshed.days, threads: corrected.threads + refreshed.threads };
  return result;
}

async function countOnly(pool: pg.Pool, users: string[], threads: string[]): Promise<ForgetResult> {
  const c = await pool.connect();
  try {
    // Not READ ONLY: that refuses even temporary tables. It always rolls back.
    await c.query('begin');
    await collect(c, users, threads);
    const rows: ErasedRows = {};
    for (const { table, where } of ERASED) {
      const r = await c.query<{ n: string }>(`select count(*)::text as n from ${table} where ${where}`);
      rows[table] = Number(r.rows[0]?.n ?? 0);
    }
    const n = await c.query<{ n: string }>('select count(*)::text as n from fg_threads');
    return {
      dryRun: true,
      users: users.length,
      threads: Number(n.rows[0]?.n ?? 0),
      rows,
      rollups: { days: 0, threads: 0 },
    };
  } finally {
    await c.query('rollback').catch(() => {});
    c.release();
  }
}

/** One erasure as `forget list` shows it: never a plain id. */
export interface Erasure {
  id: number;
  erasedAt: string;
  reason: string | null;
  users: number;
  threads: number;
  rows: ErasedRows;
}

export async function listErasures(q: Queryable): Promise<Erasure[]> {
  const r = await rowsOf<{
    id: string;
    erased_at: Date;
    reason: string | null;
    users: number;
    threads: number;
    rows_erased: ErasedRows;
  }>(q, 'select id::text, erased_at, reason, users, threads, rows_erased from privacy_erasures order by id');
  return r.map((x) => ({
    id: Number(x.id),
    erasedAt: x.erased_at.toISOString(),
    reason: x.reason,
    users: x.users,
    threads: x.threads,
    rows: x.rows_erased,
  }));
}
