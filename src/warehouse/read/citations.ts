import { markedRows, STALE_CTE, TOUCHED_THREADS_CTE } from './marked.ts';
import { type DayRange, type Queryable, rowsOf, TOP_N } from './queryable.ts';
import type { Source } from './source.ts';

/**
 * The raw tables' citations of the range with their day: the UTC day of the history entry that
 * cites (for an artifact's citations, the entry that named the artifact), or, when that entry
 * has no time, the day of its thread's first live export row; a citation with neither has no day
 * and is in no range. The rollups (rollup_citation_daily, rollup_citation_thread_days) hold the
 * same days.
 */
const CITED_IN_RANGE = `
  cited as (
    select coalesce((h.created_at at time zone 'UTC')::date,
                    (select min(a.message_date) from analytics_messages a
                      where a.thread_id = c.thread_id and a._deleted_at is null)) as day,
           coalesce(c.citation_type, '(none)') as citation_type, coalesce(c.name, '(unnamed)') as name,
           c.thread_id
      from citations c
      left join artifacts ar on c.owner_kind = 'artifact' and ar.artifact_id = c.artifact_id
      left join thread_messages h
        on h.message_id = case when c.owner_kind = 'message' then c.message_id else ar.message_id end
  ),
  in_range as (select * from cited where day between $1::date and $2::date)`;

/**
 * For the mixed forms: `moved`, the citations of the touched threads (marked.ts) as the rollups
 * hold them (negative) and as the raw tables give them now (positive), per day, type and source.
 * A citation's day may be its thread's first export day, so a thread with rows on a marked day is
 * touched whatever the range. Every read is a probe by key (`= any(array(…))`, scalar
 * subqueries): joined, PostgreSQL merge-joined the whole citations index and hashed the whole
 * history (9 s at 10M rows for 3,425 touched threads).
 */
const MOVED = `${STALE_CTE},
  m as materialized (${markedRows('distinct thread_id', false)}),
  ${TOUCHED_THREADS_CTE},
  moved as (
    select day, citation_type, name, -citations as n from rollup_citation_thread_days
     where thread_id = any(array(select thread_id from a))
    union all
    select coalesce(
             (select (x.created_at at time zone 'UTC')::date from thread_messages x
               where x.message_id = case when c.owner_kind = 'message' then c.message_id
                                         else (select ar.message_id from artifacts ar where ar.artifact_id = c.artifact_id) end),
             (select min(x.message_date) from analytics_messages x where x.thread_id = c.thread_id and x._deleted_at is null)),
           coalesce(c.citation_type, '(none)'), coalesce(c.name, '(unnamed)'), 1
      from citations c where c.thread_id = any(array(select thread_id from a))),
  moved_in as (select * from moved where day between $1::date and $2::date)`;

/**
 * Citations per source in the range with some threads marked: the rollups' with `moved_in`. When
 * the range holds every citation day of the rollups (`every`: coversEveryCitation), their all-time
 * per-source rows are the range's, as in the rollup form.
 */
const mixedPerSource = (every: boolean) => `per_source as (
    select citation_type, name, sum(n)::bigint as citations from (
      ${
        every
          ? 'select citation_type, name, citations as n from rollup_citation_sources where $1::date <= $2::date'
          : 'select citation_type, name, citations as n from rollup_citation_daily where day between $1::date and $2::date'
      }
      union all
      select citation_type, name, n from moved_in) x
     group by 1, 2 having sum(n) <> 0)`;

export interface CitationTypeDay {
  day: string;
  citationType: string;
  citations: number;
}

export async function citationTypesDaily(
  q: Queryable,
  r: DayRange,
  source: Source,
): Promise<CitationTypeDay[]> {
  const text =
    source === 'rollup'
      ? `select day::text as day, citation_type as "citationType", citations
           from rollup_citation_type_daily where day between $1::date and $2::date
          order by 1, 2`
      : source === 'mixed'
        ? `with ${MOVED}
           select day::text as day, citation_type as "citationType", sum(n)::bigint as citations from (
             select day, citation_type, citations as n from rollup_citation_type_daily
              where day between $1::date and $2::date
             union all
             select day, citation_type, n from moved_in) x
            group by 1, 2 having sum(n) <> 0 order by 1, 2`
        : `with ${CITED_IN_RANGE}
         select day::text as day, citation_type as "citationType", count(*) as citations
           from in_range group by 1, 2 order by 1, 2`;
  return rowsOf<CitationTypeDay>(q, text, [r.from, r.to]);
}

export interface CitationTypeTotal {
  citationType: string;
  citations: number;
  /** Distinct sources (names) of the type cited in the range. */
  sources: number;
}

/**
 * Whether a range holds every citation day, in a warehouse where every citation has a day (the
 * per-source and the per-day tables add up to the same citations). Then the all-time per-source
 * table (a few thousand rows) answers for the range, instead of every source's every day.
 */
async function coversEveryCitation(q: Queryable, r: DayRange): Promise<boolean> {
  const [every] = await rowsOf<{ every: boolean | null }>(
    q,
    `select $1::date <= min(day) and $2::date >= max(day)
            and (select coalesce(sum(citations), 0) from rollup_citation_sources)
                = (select coalesce(sum(citations), 0) from rollup_citation_type_daily) as every
       from rollup_citation_type_daily`,
    [r.from, r.to],
  );
  return every?.every === true;
}

/**
 * Citations and sources per type in the range. Distinct threads per type over a range are left
 * out on purpose: only a scan of every thread-day row of the range can count them, which a
 * 10M-row warehouse cannot afford per page view.
 */
export async function citationTypeTotals(
  q: Queryable,
  r: DayRange,
  source: Source,
): Promise<CitationTypeTotal[]> {
  if (source === 'rollup') {
    return rowsOf<CitationTypeTotal>(
      q,
      (await coversEveryCitation(q, r))
        ? `select citation_type as "citationType", sum(citations)::bigint as citations, count(*) as sources
             from rollup_citation_sources where $1::date <= $2::date
            group by 1 order by 2 desc, 1`
        : // Sources per type as a count of per-source groups: hashed, where count(distinct) sorts
          // (0.85 s to ~0.4 s over a year at 10M rows).
          `select citation_type as "citationType", sum(c)::bigint as citations, count(*) as sources
             from (select citation_type, name, sum(citations) as c from rollup_citation_daily
                    where day between $1::date and $2::date group by 1, 2) s
            group by 1 order by 2 desc, 1`,
      [r.from, r.to],
    );
  }
  if (source === 'mixed') {
    return rowsOf<CitationTypeTotal>(
      q,
      `with ${MOVED}, ${mixedPerSource(await coversEveryCitation(q, r))}
       select citation_type as "citationType", sum(citations)::bigint as citations, count(*) as sources
         from per_source group by 1 order by 2 desc, 1`,
      [r.from, r.to],
    );
  }
  return rowsOf<CitationTypeTotal>(
    q,
    `with ${CITED_IN_RANGE}
     select citation_type as "citationType", count(*) as citations, count(distinct name) as sources
       from in_range group by 1 order by 2 desc, 1`,
    [r.from, r.to],
  );
}

export interface CitationSource {
  citationType: string;
  name: string;
  /** Citations of the source in the range. */
  citations: number;
  /** Distinct threads that ever cited it (all days: see citationTypeTotals for why). */
  threadsAllTime: number;
}

export async function topCitationSources(
  q: Queryable,
  r: DayRange,
  source: Source,
  limit = TOP_N,
): Promise<CitationSource[]> {
  const every = source !== 'raw' && (await coversEveryCitation(q, r));
  const text =
    source === 'rollup'
      ? `with s as (${
          every
            ? `select citation_type, name, citations from rollup_citation_sources where $1::date <= $2::date
                order by 3 desc, 1, 2 limit $3`
            : `select citation_type, name, sum(citations)::bigint as citations
                 from rollup_citation_daily where day between $1::date and $2::date
                group by 1, 2 order by 3 desc, 1, 2 limit $3`
        })
         select s.citation_type as "citationType", s.name, s.citations, coalesce(a.threads, 0) as "threadsAllTime"
           from s left join rollup_citation_sources a using (citation_type, name)
          order by 3 desc, 1, 2`
      : source === 'mixed'
        ? // The sources' threads of all time: the rollups' count with the marked threads' rows
          // (per thread and source, which depend on the citations alone) taken out and put in.
          `with ${MOVED}, ${mixedPerSource(every)},
           s as (select * from per_source order by 3 desc, 1, 2 limit $3),
           was as (select citation_type, name, count(*) as n from rollup_citation_threads
                    where thread_id = any(array(select thread_id from rollup_marked_threads))
                      and (citation_type, name) in (select citation_type, name from s)
                    group by 1, 2),
           now as (select coalesce(c.citation_type, '(none)') as citation_type, coalesce(c.name, '(unnamed)') as name,
                          count(distinct c.thread_id) as n
                     from citations c
                    where c.thread_id = any(array(select thread_id from rollup_marked_threads))
                      and (coalesce(c.citation_type, '(none)'), coalesce(c.name, '(unnamed)'))
                          in (select citation_type, name from s)
                    group by 1, 2)
           select s.citation_type as "citationType", s.name, s.citations,
                  coalesce(t.threads, 0) - coalesce(was.n, 0) + coalesce(now.n, 0) as "threadsAllTime"
             from s left join rollup_citation_sources t using (citation_type, name)
             left join was using (citation_type, name) left join now using (citation_type, name)
            order by 3 desc, 1, 2`
        : `with ${CITED_IN_RANGE},
         s as (select citation_type, name, count(*) as citations
                 from in_range group by 1, 2 order by 3 desc, 1, 2 limit $3),
         a as (select coalesce(c.citation_type, '(none)') as citation_type, coalesce(c.name, '(unnamed)') as name,
                      count(distinct c.thread_id) as threads
                 from citations c
                where (coalesce(c.citation_type, '(none)'), coalesce(c.name, '(unnamed)'))
                      in (select citation_type, name from s)
                group by 1, 2)
         select s.citation_type as "citationType", s.name, s.citations, coalesce(a.threads, 0) as "threadsAllTime"
           from s left join a using (citation_type, name)
          order by 3 desc, 1, 2`;
  return rowsOf<CitationSource>(q, text, [r.from, r.to, limit]);
}
