import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/simulator/prng.ts';
import {
  citationTypesDaily,
  MIXED_DASHBOARD_QUERIES,
  RAW_DASHBOARD_QUERIES,
  readSource,
  topCitationSources,
  topThreads,
  topUsers,
} from '../../src/warehouse/read/index.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import { testSeed } from '../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * The mixed forms (the rollups for what is current, the raw rows of the marked keys) against the
 * raw tables, after writes of every kind a load or an enrichment batch makes without a refresh
 * yet: export rows added, withdrawn and brought back on some days (new and known users and
 * threads), statuses changed, history entries added and cancelled, citations added and removed.
 * Every dashboard query over every range, the top lists at a small limit too (ties), and the
 * three per-entity BI views against their raw functions. Several rounds, marks kept across some
 * and refreshed between others. Drawn from a seeded generator: the seed is printed
 * (MARKED_SEED=… replays it).
 */
const SEED = testSeed(20261128, 'MARKED_SEED');
const rand = new Rng(SEED);
let tw: TestWarehouse;
const DAYS = Array.from({ length: 7 }, (_, i) => `2026-11-${String(i + 3).padStart(2, '0')}`);
/**
 * A day before DAYS with one message of a user of its own, unenriched: no round writes to it
 * (writeRound's rows, withdrawals and enrichment stay on DAYS), so the test that makes a rollup
 * row wrong always has an untouched user to make wrong, whatever the seed.
 */
const QUIET_DAY = '2026-11-01';
const RANGES: Array<{ from: string; to: string }> = [{ from: '2026-10-30', to: DAYS[3] ?? '' }];
for (let a = 0; a < DAYS.length; a++) {
  for (let b = a; b < DAYS.length; b++) RANGES.push({ from: DAYS[a] ?? '', to: DAYS[b] ?? '' });
}
const STATUSES = ['pending', 'done', 'failed', 'forbidden', 'deleted'];
let next = 0;

const sql = (text: string, values: unknown[] = []) => tw.w.pool.query(text, values);

/** An export row of `user` in `thread` on `day`; returns its message id. */
async function message(user: number, thread: number, day: string): Promise<string> {
  const i = next++;
  const r = await sql(
    `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input, response,
                                     extra, record_hash, _source_line, _load_id, response_chars)
     values (md5('m' || $1::text)::uuid, md5('t' || $2)::uuid, md5('u' || $3)::uuid,
             $4::date + make_interval(mins => $5), $4::date, 'q', 'a', '{}', md5($1::text), $1::bigint, 'fuzz', $6)
     returning message_id::text as id`,
    [i, thread, user, day, rand.int(1440), rand.pick([0, 5, 12, 40])],
  );
  return (r.rows[0] as { id: string }).id;
}

/** What enrichment stores for a message: its history entry, maybe an artifact, citations. */
async function enrich(messageId: string, thread: number, day: string): Promise<void> {
  const when = rand.chance(0.15)
    ? null
    : rand.chance(0.2)
      ? `${rand.pick(DAYS)} 10:00Z`
      : `${day} ${String(rand.int(24)).padStart(2, '0')}:00Z`;
  await sql(
    `insert into thread_messages (message_id, thread_id, position, created_at, is_cancelled, raw)
     values ($1, md5('t' || $2)::uuid, $3, $4, $5, '{}') on conflict do nothing`,
    [messageId, thread, next++, when, rand.chance(0.15)],
  );
  const cites = rand.int(3);
  for (let k = 0; k < cites; k++) {
    const type = rand.pick(['web', 'doc', null]);
    const name = rand.pick(['a.example', 'b.example', 'c.example', null]);
    const updated = `2026-11-${String(1 + rand.int(20)).padStart(2, '0')}T00:00:00Z`;
    if (rand.chance(0.3)) {
      const artifact = `art-${next++}`;
      await sql(
        `insert into artifacts (artifact_id, thread_id, message_id, raw, fetched_via)
         values ($1, md5('t' || $2)::uuid, $3, '{}', 'v2')`,
        [artifact, thread, messageId],
      );
      await sql(
        `insert into citations (owner_kind, owner_id, ordinal, artifact_id, thread_id, citation_type, name, last_updated_at)
         values ('artifact', $1, 0, $1, md5('t' || $2)::uuid, $3, $4, $5)`,
        [artifact, thread, type, name, updated],
      );
    } else {
      await sql(
        `insert into citations (owner_kind, owner_id, ordinal, message_id, thread_id, citation_type, name, last_updated_at)
         values ('message', $1::text, $2, $1::uuid, md5('t' || $3)::uuid, $4, $5, $6)`,
        [messageId, next++, thread, type, name, updated],
      );
    }
  }
}

/** A thread's queue row (most threads have one), with a status. */
async function queue(thread: number): Promise<void> {
  await sql(
    `insert into threads (thread_id, thread_name, enrich_status) values (md5('t' || $1)::uuid, $2, $3)
     on conflict do nothing`,
    [thread, `thread ${thread}`, rand.pick(STATUSES)],
  );
}

async function addRows(day: string, n: number, users: number, threads: number): Promise<void> {
  for (let k = 0; k < n; k++) {
    const thread = rand.int(threads);
    // A thread's user, as a rule; now and then a second one.
    const user = rand.chance(0.1) ? rand.int(users) : thread % users;
    const id = await message(user, thread, day);
    if (rand.chance(0.8)) await queue(thread);
    if (rand.chance(0.6)) await enrich(id, thread, day);
  }
}

/** One round of writes without a refresh: some days' rows, some threads' enrichment. */
async function writeRound(): Promise<void> {
  const days = [rand.pick(DAYS), ...(rand.chance(0.5) ? [rand.pick(DAYS)] : [])];
  for (const day of days) {
    await addRows(day, 3 + rand.int(6), 9, 40);
    await sql(
      `update analytics_messages set _deleted_at = now()
        where message_id in (select message_id from analytics_messages
                              where message_date = $1 and _deleted_at is null order by md5(message_id::text || $2) limit $3)`,
      [day, SEED, 1 + rand.int(3)],
    );
    if (rand.chance(0.4)) {
      await sql(
        `update analytics_messages set _deleted_at = null
          where message_id in (select message_id from analytics_messages
                                where message_date = $1 and _deleted_at is not null limit 1)`,
        [day],
      );
    }
  }
  // Enrichment of threads on other days: statuses, history entries, cancellations, citations.
  for (let k = 0; k < 3; k++) {
    await sql(
      `update threads set enrich_status = $1
        where thread_id = (select thread_id from threads order by md5(thread_id::text || $2) limit 1)`,
      [rand.pick(STATUSES), next++],
    );
  }
  const [row] = (
    await sql(
      `select message_id::text as id, thread_id::text as t, message_date::text as d from analytics_messages
        where message_id not in (select message_id from thread_messages) and message_date <> $2::date
        order by md5(message_id::text || $1) limit 1`,
      [next++, QUIET_DAY],
    )
  ).rows as Array<{ id: string; t: string; d: string }>;
  if (row) {
    const thread = Number(
      (
        (await sql(`select i from generate_series(0, 60) i where md5('t' || i)::uuid = $1`, [row.t]))
          .rows[0] as { i: number } | undefined
      )?.i ?? 0,
    );
    await enrich(row.id, thread, row.d);
  }
  await sql(
    `update thread_messages set is_cancelled = not is_cancelled
      where message_id = (select message_id from thread_messages order by md5(message_id::text || $1) limit 1)`,
    [next++],
  );
  await sql(
    `delete from citations where (owner_kind, owner_id, ordinal) in
       (select owner_kind, owner_id, ordinal from citations order by md5(owner_id || $1) limit 1)`,
    [next++],
  );
}

async function expectMixedEqualsRaw(stage: string): Promise<void> {
  expect(await readSource(tw.w.pool), stage).toBe('mixed');
  for (const r of RANGES) {
    const at = `${stage}, ${r.from}..${r.to} (seed ${SEED})`;
    for (const [name, query] of Object.entries(MIXED_DASHBOARD_QUERIES)) {
      const raw = await RAW_DASHBOARD_QUERIES[name]?.(tw.w.pool, r);
      expect(await query(tw.w.pool, r), `${at}: ${name}`).toEqual(raw);
    }
    for (const limit of [2, 5]) {
      expect(await topUsers(tw.w.pool, r, 'mixed', limit), `${at}: top ${limit} users`).toEqual(
        await topUsers(tw.w.pool, r, 'raw', limit),
      );
      expect(await topThreads(tw.w.pool, r, 'mixed', limit), `${at}: top ${limit} threads`).toEqual(
        await topThreads(tw.w.pool, r, 'raw', limit),
      );
      expect(await topCitationSources(tw.w.pool, r, 'mixed', limit), `${at}: top ${limit} sources`).toEqual(
        await topCitationSources(tw.w.pool, r, 'raw', limit),
      );
    }
  }
  for (const [view, order] of [
    ['user_activity', 'user_id'],
    ['thread_summary', 'thread_id'],
    ['citation_sources', 'citation_type, name'],
    ['daily_usage', 'message_date'],
  ] as const) {
    const rows = await sql(`select * from ${view} order by ${order}`);
    const raw = await sql(`select * from rollup_raw_${view}() order by ${order}`);
    expect(rows.rows, `${stage}: view ${view} (seed ${SEED})`).toEqual(raw.rows);
  }
}

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'read_fuzz' });
  console.info(`read-marked-fuzz test: seed ${SEED} (MARKED_SEED=${SEED} replays it)`);
  for (const day of DAYS) await addRows(day, 12, 7, 30);
  await sql(
    `insert into analytics_messages (message_id, thread_id, user_id, message_time, message_date, input, response,
                                     extra, record_hash, _source_line, _load_id, response_chars)
     values (md5('quiet')::uuid, md5('t-quiet')::uuid, md5('u-quiet')::uuid, $1::date + interval '9 hours', $1::date,
             'q', 'a', '{}', md5('quiet'), 0, 'fuzz', 3)`,
    [QUIET_DAY],
  );
  await refreshRollups(tw.w.pool, undefined, { rebuild: true });
});

afterAll(async () => {
  await tw?.dispose();
});

describe('mixed reads against the raw tables (seeded)', () => {
  it('when loads and enrichment write without a refresh, then every mixed query and view gives the raw answer', async () => {
    for (let round = 0; round < 4; round++) {
      await writeRound();
      await expectMixedEqualsRaw(`round ${round}`);
      // Marks kept across the next round, or refreshed first.
      if (round % 2 === 1) await refreshRollups(tw.w.pool);
    }
  });

  it('when a current rollup row is made wrong on purpose, then the mixed forms show it (they read the rollups) and the marked part raw', async () => {
    await writeRound();
    expect(await readSource(tw.w.pool)).toBe('mixed');
    // From the quiet day: the range covers every row, so the top users read rollup_users.
    const all = { from: QUIET_DAY, to: DAYS[DAYS.length - 1] ?? '' };
    // An untouched user (no rows on a marked day, then or now) made the busiest of all; the quiet
    // day's user is one, whatever the rounds drew.
    const u = (
      await sql(
        `select user_id::text as id from rollup_users
          where user_id not in (select user_id from rollup_user_daily where message_date in (select day from rollup_dirty_days))
            and user_id not in (select user_id from analytics_messages where message_date in (select day from rollup_dirty_days))
          order by user_id = md5('u-quiet')::uuid, user_id limit 1`,
      )
    ).rows[0] as { id: string } | undefined;
    const current = (
      await sql(
        `select day::text as d, citation_type as t, citations as n from rollup_citation_type_daily
          where day not in (select day from rollup_dirty_days) order by 1, 2 limit 1`,
      )
    ).rows[0] as { d: string; t: string; n: number } | undefined;
    // Both must exist, or the checks below would have nothing to check.
    if (!u) throw new Error(`seed ${SEED}: no untouched user to make wrong`);
    if (!current) throw new Error(`seed ${SEED}: no current citation rollup row to make wrong`);
    // The raw figure of that day and type: the rollups' (made wrong below) plus what the marked
    // threads moved since the refresh.
    const raw =
      (await citationTypesDaily(tw.w.pool, { from: current.d, to: current.d }, 'raw')).find(
        (x) => x.citationType === current.t,
      )?.citations ?? 0;
    await sql('update rollup_users set messages = 100000 where user_id = $1', [u.id]);
    await sql(`update rollup_citation_type_daily set citations = 777 where day = $1 and citation_type = $2`, [
      current.d,
      current.t,
    ]);
    try {
      expect((await topUsers(tw.w.pool, all, 'mixed'))[0]).toMatchObject({ userId: u.id, messages: 100000 });
      const view = await sql('select messages from user_activity where user_id = $1', [u.id]);
      expect(view.rows).toEqual([{ messages: 100000 }]);
      const daily = await citationTypesDaily(tw.w.pool, { from: current.d, to: current.d }, 'mixed');
      expect(daily.find((x) => x.citationType === current.t)?.citations).toBe(777 + raw - current.n);
    } finally {
      await refreshRollups(tw.w.pool, undefined, { rebuild: true });
    }
  });
});
