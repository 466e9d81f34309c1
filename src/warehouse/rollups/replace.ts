import type { Client } from './transaction.ts';

/**
 * Replaces a rollup's rows for a set of keys, and puts the keys (column `key`) of rows that
 * changed into the temporary set `into`.
 */
export async function replaceRows(
  c: Client,
  o: { table: string; where: string; select: string; key?: string; into?: string },
): Promise<void> {
  if (o.key && o.into) {
    await c.query(`create temp table rd_old on commit drop as select * from ${o.table} where ${o.where}`);
  }
  await c.query(`delete from ${o.table} where ${o.where}`);
  await c.query(`insert into ${o.table} ${o.select}`);
  if (o.key && o.into) {
    const had = await c.query<{ any: boolean }>('select exists (select 1 from rd_old) as any');
    // Nothing there before (a first load of the keys): every new row is a change.
    // Distinct before the insert: a key has a row per day (a thread of a 1M-line first load about
    // 22), and each duplicate would be a probe of the key set's index to do nothing.
    const changed =
      had.rows[0]?.any === false
        ? `select distinct ${o.key} from ${o.table} where ${o.where}`
        : `select distinct ${o.key} from (
         (select * from rd_old except all select * from ${o.table} where ${o.where})
         union all
         (select * from ${o.table} where ${o.where} except all select * from rd_old)) x`;
    await c.query(`insert into ${o.into} ${changed} on conflict do nothing`);
    await c.query('drop table rd_old');
  }
}

/**
 * Keeps a total table (per source, or per source and day) by difference: the per-thread rows of
 * the touched threads are replaced, and what they added up to before is taken out of the totals
 * and what they add up to now put in. `group` names the total's key columns; `threads`, the
 * touched threads as a subquery (rd_threads, or its keys as refresh-marked.ts `threadKeys` gives them).
 */
export async function replaceByDelta(
  c: Client,
  o: {
    threads: string;
    perThread: string;
    select: string;
    totals: string;
    group: string[];
    latest: boolean;
    touched?: string;
  },
): Promise<void> {
  const where = `thread_id in (${o.threads})`;
  const g = o.group.join(', ');
  const sums = `sum(citations) as c, count(*) as t, sum(messages) as m, sum(artifacts) as a${
    o.latest ? ', max(last_updated_at) as lu' : ''
  }`;
  await c.query(
    `create temp table rd_old on commit drop as
     select ${g}, ${sums} from ${o.perThread} where ${where} group by ${g}`,
  );
  await c.query(`delete from ${o.perThread} where ${where}`);
  await c.query(`insert into ${o.perThread} ${o.select}`);
  await c.query(
    `create temp table rd_new on commit drop as
     select ${g}, ${sums} from ${o.perThread} where ${where} group by ${g}`,
  );
  const on = o.group.map((k) => `n.${k} = o.${k}`).join(' and ');
  const keys = o.group.map((k) => `coalesce(n.${k}, o.${k})`).join(', ');
  await c.query(
    `insert into ${o.totals} as s (${g}, citations, threads, messages, artifacts${o.latest ? ', last_updated_at' : ''})
     select ${keys}, coalesce(n.c, 0) - coalesce(o.c, 0), coalesce(n.t, 0) - coalesce(o.t, 0),
            coalesce(n.m, 0) - coalesce(o.m, 0), coalesce(n.a, 0) - coalesce(o.a, 0)${o.latest ? ', n.lu' : ''}
     from rd_new n full join rd_old o on ${on}
     on conflict (${g}) do update set citations = s.citations + excluded.citations,
       threads = s.threads + excluded.threads, messages = s.messages + excluded.messages,
       artifacts = s.artifacts + excluded.artifacts
       ${o.latest ? ', last_updated_at = greatest(s.last_updated_at, excluded.last_updated_at)' : ''}`,
  );
  if (o.latest) {
    // A latest date that left (its citation removed, or replaced by an older one) is read again
    // from the per-thread rows of that source: rare, and bounded by the source's threads.
    await c.query(
      `update ${o.totals} s set last_updated_at = (
         select max(x.last_updated_at) from ${o.perThread} x
         where x.citation_type = s.citation_type and x.name = s.name)
       from rd_old o left join rd_new n on n.citation_type = o.citation_type and n.name = o.name
       where s.citation_type = o.citation_type and s.name = o.name and o.lu is not null
         and o.lu >= s.last_updated_at and (n.lu is null or n.lu < o.lu)`,
    );
  }
  await c.query(
    `delete from ${o.totals} s using rd_old o
     where ${o.group.map((k) => `s.${k} = o.${k}`).join(' and ')} and s.citations = 0`,
  );
  if (o.touched) {
    await c.query(
      `insert into ${o.touched} select day, citation_type from rd_old union select day, citation_type from rd_new`,
    );
  }
  await c.query('drop table rd_old');
  await c.query('drop table rd_new');
}
