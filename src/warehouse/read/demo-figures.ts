import { type Queryable, rowsOf } from './queryable.ts';

/** The warehouse's figures after the demo's backfill (`crs-sync demo`'s summary), read back from the tables. */
export interface WarehouseFigures {
  daysComplete: number;
  daysFailed: number;
  /** Live export rows (analytics_messages without _deleted_at). */
  rows: number;
  rowsDeleted: number;
  threads: Record<string, number>;
  threadsTotal: number;
  threadMessages: number;
  citations: number;
  artifacts: number;
  /** Open (not replayed) rejects by source. */
  rejects: Record<string, number>;
  rejectsTotal: number;
}

export interface BiResults {
  topDays: {
    message_date: string;
    messages: number;
    active_users: number;
    active_threads: number;
    cancelled: number;
    avg_response_chars: number | null;
  }[];
  topSources: { citation_type: string; name: string; citations: number; threads: number }[];
  topUsers: { user_id: string; days_active: number; messages: number; threads: number }[];
  health: {
    watermark: string | null;
    lag_days: number | null;
    complete_days: number;
    failed_days: number;
    last_run_status: string | null;
    open_rejects: number;
    threads_pending: number;
  };
}

const n = (v: unknown): number => Number(v ?? 0);

export async function readFigures(q: Queryable): Promise<WarehouseFigures> {
  const one = async (text: string) => (await rowsOf<Record<string, unknown>>(q, text))[0] ?? {};
  const days = await one(
    `select count(*) filter (where status = 'complete') as complete, count(*) filter (where status = 'failed') as failed from sync_days`,
  );
  const rows = await one(
    'select count(*) filter (where _deleted_at is null) as live, count(*) filter (where _deleted_at is not null) as deleted from analytics_messages',
  );
  const threads = await rowsOf<{ enrich_status: string; n: number }>(
    q,
    'select enrich_status, count(*)::int as n from threads group by 1 order by 1',
  );
  const counts = await one(
    'select (select count(*) from thread_messages) as tm, (select count(*) from citations) as c, (select count(*) from artifacts) as a',
  );
  const rejects = await rowsOf<{ source: string; n: number }>(
    q,
    'select source, count(*)::int as n from rejected_records where replayed_at is null group by 1 order by 1',
  );
  const byStatus = Object.fromEntries(threads.map((r) => [r.enrich_status, n(r.n)]));
  const bySource = Object.fromEntries(rejects.map((r) => [r.source, n(r.n)]));
  return {
    daysComplete: n(days.complete),
    daysFailed: n(days.failed),
    rows: n(rows.live),
    rowsDeleted: n(rows.deleted),
    threads: byStatus,
    threadsTotal: Object.values(byStatus).reduce((s, v) => s + v, 0),
    threadMessages: n(counts.tm),
    citations: n(counts.c),
    artifacts: n(counts.a),
    rejects: bySource,
    rejectsTotal: Object.values(bySource).reduce((s, v) => s + v, 0),
  };
}

/** A few questions a dashboard would ask, answered from the BI views. */
export async function readBi(q: Queryable): Promise<BiResults> {
  const topDays = await rowsOf<BiResults['topDays'][number]>(
    q,
    `select message_date::text as message_date, messages::int, active_users::int, active_threads::int,
            cancelled::int, round(avg_response_chars)::int as avg_response_chars
     from daily_usage order by messages desc, message_date desc limit 5`,
  );
  const topSources = await rowsOf<BiResults['topSources'][number]>(
    q,
    `select citation_type, name, citations::int, threads::int
     from citation_sources order by citations desc, citation_type, name limit 5`,
  );
  const topUsers = await rowsOf<BiResults['topUsers'][number]>(
    q,
    `select user_id::text as user_id, days_active::int, messages::int, threads::int
     from user_activity order by messages desc, user_id limit 5`,
  );
  const [health] = await rowsOf<BiResults['health']>(
    q,
    `select watermark::text as watermark, lag_days, complete_days::int, failed_days::int, last_run_status,
            open_rejects::int, threads_pending::int
     from sync_health`,
  );
  return {
    topDays,
    topSources,
    topUsers,
    health: health as BiResults['health'],
  };
}
