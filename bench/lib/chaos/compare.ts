import { sql } from 'kysely';
import type { Simulator } from '../../../src/simulator/index.ts';
import type { Warehouse } from '../../../src/warehouse/db.ts';
import {
  DASHBOARD_QUERIES,
  dataExtent,
  MIXED_DASHBOARD_QUERIES,
  RAW_DASHBOARD_QUERIES,
  readSource,
  STATE_QUERY_NAMES,
} from '../../../src/warehouse/read/index.ts';
import { beginReadSnapshot, endReadSnapshot } from '../../../src/warehouse/read/snapshot.ts';
import { type Erased, erasedStillHeld, isErased, NOTHING_ERASED } from './erased.ts';

/**
 * The warehouse against the simulator's ground truth, row by row: every table the connector
 * writes, with the columns that carry the service's data. Each difference is one line of text
 * naming the table, the key and what differs; `compared` counts the expected rows per table.
 */
export interface Comparison {
  compared: Record<string, number>;
  differences: Record<string, string[]>;
}

const SPEC_KEYS = new Set(['Input', 'Response', 'Message ID', 'Message Time', 'Thread ID', 'User ID']);
/** Spec §2 citation fields: the warehouse has a column for each; anything else goes to `extra`. */
const CITATION_FIELDS = [
  'id',
  'internal_id',
  'citation_type',
  'name',
  'inline_offset',
  'summary',
  'last_updated_at',
  'is_snippet',
];

export type Row = Record<string, unknown>;

/** A stable text of a value: keys sorted, dates as ISO instants. */
function canon(v: unknown): string {
  return JSON.stringify(v ?? null, (_k, x: unknown) => {
    if (x instanceof Date) return x.toISOString();
    if (x && typeof x === 'object' && !Array.isArray(x)) {
      return Object.fromEntries(Object.entries(x as Row).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    }
    return x;
  });
}

/** Compares two sets of rows by key; records missing, unexpected and differing rows. */
export function diffRows(
  table: string,
  expected: Map<string, Row>,
  actual: Map<string, Row>,
  out: string[],
): void {
  for (const [key, e] of expected) {
    const a = actual.get(key);
    if (!a) {
      out.push(`${table} ${key}: missing`);
      continue;
    }
    for (const col of Object.keys(e)) {
      if (canon(e[col]) !== canon(a[col])) {
        out.push(
          `${table} ${key}: ${col} is ${canon(a[col]).slice(0, 120)}, expected ${canon(e[col]).slice(0, 120)}`,
        );
      }
    }
  }
  for (const key of actual.keys()) if (!expected.has(key)) out.push(`${table} ${key}: not in the service`);
}

const q = async <T extends Row>(w: Warehouse, text: string): Promise<T[]> =>
  (await sql.raw<T>(text).execute(w.db)).rows;

/**
 * Soft-deleted rows the service still has: a faulty export (cut, truncated, an error page)
 * must never delete anything. Checked before the clean pass too, which would restore them.
 */
export async function wronglyDeleted(w: Warehouse, sim: Simulator, days: string[]): Promise<string[]> {
  const live = new Set(days.flatMap((d) => sim.truth.exportDay(d).map((r) => r['Message ID'].toLowerCase())));
  const rows = await q<{ message_id: string }>(
    w,
    'select message_id::text as message_id from analytics_messages where _deleted_at is not null',
  );
  return rows.filter((r) => live.has(r.message_id)).map((r) => `analytics_messages ${r.message_id}: deleted`);
}

/**
 * The rows the service's export of the days holds now, by message id, in the shape
 * warehouseMessages reads: every column from the export, and live; without the records of erased
 * users and threads, which no load may write again.
 */
export function expectedMessages(
  sim: Simulator,
  days: string[],
  erased: Erased = NOTHING_ERASED,
): Map<string, Row> {
  const out = new Map<string, Row>();
  for (const day of days) {
    for (const r of sim.truth.exportDay(day)) {
      if (isErased(erased, r)) continue;
      const extra = Object.fromEntries(Object.entries(r).filter(([k]) => !SPEC_KEYS.has(k)));
      out.set(r['Message ID'].toLowerCase(), {
        thread_id: r['Thread ID'].toLowerCase(),
        user_id: r['User ID'].toLowerCase(),
        message_time: new Date(r['Message Time']).toISOString(),
        message_date: day,
        input: r.Input,
        response: r.Response,
        extra: Object.keys(extra).length > 0 ? extra : null,
        deleted: false,
      });
    }
  }
  return out;
}

/** The warehouse's analytics rows (deleted ones included), of one day or all, by message id. */
export async function warehouseMessages(w: Warehouse, day?: string): Promise<Map<string, Row>> {
  const { rows } = (await w.pool.query(
    `select message_id::text as message_id, thread_id::text as thread_id, user_id::text as user_id,
            message_time, message_date::text as message_date, input, response, extra,
            _deleted_at is not null as deleted
     from analytics_messages where $1::date is null or message_date = $1::date`,
    [day ?? null],
  )) as { rows: (Row & { message_id: string })[] };
  return new Map(
    rows.map(({ message_id, ...r }) => [
      message_id,
      { ...r, message_time: (r.message_time as Date).toISOString() },
    ]),
  );
}

/**
 * `erased`: what `crs-sync forget` erased during the run. Its records are expected absent (not
 * differences), the ledger is expected to count their lines as suppressed, and every table that
 * still names one of its ids is a difference (the `erased` table of the comparison).
 */
export async function compareWithTruth(
  w: Warehouse,
  sim: Simulator,
  days: string[],
  erased: Erased = NOTHING_ERASED,
): Promise<Comparison> {
  const differences: Record<string, string[]> = {};
  const compared: Record<string, number> = {};
  const diff = (t: string) => {
    differences[t] ??= [];
    return differences[t];
  };

  // ---- analytics rows: every column from the export, and the deleted flag ----
  const expectedMsgs = expectedMessages(sim, days, erased);
  // Only the threads of rows kept: an erased thread, its history, citations and artifacts are
  // expected nowhere.
  const threadIds = new Set([...expectedMsgs.values()].map((r) => r.thread_id as string));
  compared.analytics_messages = expectedMsgs.size;
  diffRows('analytics_messages', expectedMsgs, await warehouseMessages(w), diff('analytics_messages'));

  // ---- threads, their history, artifacts and citations ----
  const expThreads = new Map<string, Row>();
  const expMessages = new Map<string, Row>();
  const expArtifacts = new Map<string, Row>();
  const expCitations = new Map<string, Row>();
  const poisonEntries = new Set<string>();
  const poisonArtifacts = new Set<string>();
  for (const id of threadIds) {
    const history = sim.truth.threadHistory(id);
    if (!history) {
      expThreads.set(id, { enrich_status: 'deleted' });
      continue;
    }
    if (sim.truth.isRestricted(id)) {
      expThreads.set(id, { enrich_status: 'forbidden' });
      continue;
    }
    expThreads.set(id, { enrich_status: 'done' });
    const badEntries = new Set(sim.truth.poisonEntries(id));
    const badArtifacts = new Set(sim.truth.poisonArtifacts(id));
    for (const x of badEntries) poisonEntries.add(x);
    for (const x of badArtifacts) poisonArtifacts.add(x);
    const firstNamer = new Map<string, string>();
    history.forEach((e, position) => {
      for (const a of e.artifact_ids) if (!firstNamer.has(a)) firstNamer.set(a, e.message_id);
      if (badEntries.has(e.message_id)) return;
      expMessages.set(e.message_id, { thread_id: id, position, raw: e });
      e.citations.forEach((c, i) => {
        expCitations.set(`message/${e.message_id}/${i}`, citationRow(c));
      });
    });
    for (const [artifactId, messageId] of firstNamer) {
      if (badArtifacts.has(artifactId)) continue;
      const a = sim.truth.artifact(id, artifactId)?.artifact;
      if (!a) continue;
      expArtifacts.set(artifactId, {
        thread_id: id,
        message_id: messageId,
        output_type: a.output_type,
        title: a.title,
        val: a.val,
        raw: a,
        fetched_via: 'v2',
      });
      a.citations.forEach((c, i) => {
        expCitations.set(`artifact/${artifactId}/${i}`, citationRow(c));
      });
    }
  }
  const threadRows = await q<{ thread_id: string; enrich_status: string; last_error: string | null }>(
    w,
    'select thread_id::text as thread_id, enrich_status, last_error from threads',
  );
  compared.threads = expThreads.size;
  const threadDiffs: string[] = [];
  diffRows(
    'threads',
    expThreads,
    new Map(threadRows.map((r) => [r.thread_id, { enrich_status: r.enrich_status }])),
    threadDiffs,
  );
  // The thread's own last error says why its enrichment ended where it did.
  const errors = new Map(threadRows.map((r) => [r.thread_id, r.last_error]));
  diff('threads').push(
    ...threadDiffs.map((d) => {
      const e = errors.get((d.split(' ')[1] ?? '').replace(/:$/, ''));
      return e ? `${d} (last_error: ${e.slice(0, 200)})` : d;
    }),
  );
  const messageRows = await q<{ message_id: string; thread_id: string; position: number; raw: unknown }>(
    w,
    'select message_id::text as message_id, thread_id::text as thread_id, position, raw from thread_messages',
  );
  compared.thread_messages = expMessages.size;
  diffRows(
    'thread_messages',
    expMessages,
    new Map(messageRows.map(({ message_id, ...r }) => [message_id, r])),
    diff('thread_messages'),
  );
  const artifactRows = await q<Row & { artifact_id: string }>(
    w,
    `select artifact_id, thread_id::text as thread_id, message_id::text as message_id, output_type, title, val,
            raw, fetched_via from artifacts`,
  );
  compared.artifacts = expArtifacts.size;
  diffRows(
    'artifacts',
    expArtifacts,
    new Map(artifactRows.map(({ artifact_id, ...r }) => [artifact_id, r])),
    diff('artifacts'),
  );
  const citationRows = await q<Row & { owner_kind: string; owner_id: string; ordinal: number }>(
    w,
    `select owner_kind, owner_id, ordinal, citation_id, citation_type, name, inline_offset, is_snippet, extra
     from citations`,
  );
  compared.citations = expCitations.size;
  diffRows(
    'citations',
    expCitations,
    new Map(
      citationRows.map(({ owner_kind, owner_id, ordinal, ...r }) => [
        `${owner_kind}/${owner_id}/${ordinal}`,
        r,
      ]),
    ),
    diff('citations'),
  );

  // ---- the ledger: each day complete, its counts those of the (clean) last load ----
  // The lines of erased records are read and suppressed: neither loaded nor deleted.
  const expDays = new Map<string, Row>();
  for (const day of days) {
    const records = sim.truth.exportDay(day);
    const kept = records.filter((r) => !isErased(erased, r));
    const rows = new Set(kept.map((r) => r['Message ID'].toLowerCase())).size;
    const rejected = sim.truth.poisonLines(day).filter((l) => l.trim() !== '').length;
    expDays.set(day, {
      status: 'complete',
      rows_loaded: rows,
      rows_rejected: rejected,
      rows_suppressed: records.length - kept.length,
      rows_deleted: 0,
    });
  }
  const dayRows = await q<Row & { day: string }>(
    w,
    `select day::text as day, status, (rows_inserted + rows_updated + rows_unchanged)::int as rows_loaded,
            rows_rejected::int as rows_rejected, rows_suppressed::int as rows_suppressed,
            rows_deleted::int as rows_deleted from sync_days`,
  );
  compared.sync_days = expDays.size;
  diffRows('sync_days', expDays, new Map(dayRows.map(({ day, ...r }) => [day, r])), diff('sync_days'));

  // ---- the quarantine: every poison line, entry and artifact, and nothing else ----
  // A whitespace-only line holds no record: skipping it like a blank line is as right as
  // quarantining it, so it is expected in neither place but allowed in the quarantine.
  const poisonLines = new Set(days.flatMap((d) => sim.truth.poisonLines(d)));
  const rejected = await q<{ source: string; raw: string; source_name: string | null }>(
    w,
    'select source, raw, source_name from rejected_records',
  );
  // An entry or artifact is known by its id, in its quarantined text or as the source's name.
  const names = (r: { raw: string; source_name: string | null }, id: string) =>
    (r.source_name ?? '').includes(id) || r.raw.includes(id);
  const seenLines = new Set(rejected.filter((r) => r.source === 'export').map((r) => r.raw));
  const quarantine = diff('rejected_records');
  let expectedRejects = 0;
  for (const line of poisonLines) {
    if (line.trim() === '') continue;
    expectedRejects++;
    if (!seenLines.has(line)) quarantine.push(`rejected_records export line: missing ${line.slice(0, 100)}`);
  }
  for (const [source, ids] of [
    ['history', poisonEntries],
    ['artifact', poisonArtifacts],
  ] as const) {
    const of = rejected.filter((r) => r.source === source);
    for (const id of ids) {
      expectedRejects++;
      if (!of.some((r) => names(r, id))) quarantine.push(`rejected_records ${source} ${id}: missing`);
    }
  }
  for (const r of rejected) {
    const ok =
      (r.source === 'export' && poisonLines.has(r.raw)) ||
      (r.source === 'history' && [...poisonEntries].some((id) => names(r, id))) ||
      (r.source === 'artifact' && [...poisonArtifacts].some((id) => names(r, id)));
    if (!ok) {
      quarantine.push(
        `rejected_records ${r.source} ${r.source_name ?? ''}: unexpected ${r.raw.slice(0, 100)}`,
      );
    }
  }
  compared.rejected_records = expectedRejects;

  // ---- what readers show: the rollups (or the mixed forms) against the raw tables ----
  diff('rollups').push(...(await readersAgainstRaw(w, 'after the clean pass')));
  compared.rollups = Object.keys(RAW_DASHBOARD_QUERIES).length - STATE_QUERY_NAMES.length;

  // ---- what was erased: no table of either schema names an erased user, thread or record ----
  diff('erased').push(...(await erasedStillHeld(w.pool, w.schema, erased)));
  compared.erased = erased.users.size + erased.threads.size + erased.messages.size;
  return { compared, differences };
}

function citationRow(c: object): Row {
  const o = c as Row;
  const extra = Object.fromEntries(Object.entries(o).filter(([k]) => !CITATION_FIELDS.includes(k)));
  return {
    citation_id: o.id,
    citation_type: o.citation_type,
    name: o.name,
    inline_offset: o.inline_offset,
    is_snippet: o.is_snippet,
    extra: Object.keys(extra).length > 0 ? extra : null,
  };
}

/**
 * What readers show against the raw tables, once the loads are done: every dashboard query over
 * every day with data, as readSource picks its form (the rollups, or the mixed forms while marks
 * remain), must give the raw tables' answer, in one snapshot; and no day may still wait for a
 * pull's finalize (decision 0015: a pull that died is released by the next pull of its day).
 */
export async function readersAgainstRaw(w: Warehouse, label: string): Promise<string[]> {
  const out: string[] = [];
  const c = await w.pool.connect();
  try {
    await beginReadSnapshot(c, 0);
    const waiting = await c.query<{ day: string }>(
      'select distinct day::text as day from rollup_waiting_days',
    );
    for (const r of waiting.rows) out.push(`${label} rollups: ${r.day} still waits for a pull's finalize`);
    const source = await readSource(c);
    const readers =
      source === 'rollup'
        ? DASHBOARD_QUERIES
        : source === 'mixed'
          ? MIXED_DASHBOARD_QUERIES
          : RAW_DASHBOARD_QUERIES;
    const extent = await dataExtent(c, 'raw');
    if (extent.firstDay === null || extent.lastDay === null) return out;
    const range = { from: extent.firstDay, to: extent.lastDay };
    for (const [name, query] of Object.entries(readers)) {
      if (STATE_QUERY_NAMES.includes(name)) continue;
      const shown = JSON.stringify(await query(c, range));
      const raw = JSON.stringify(await RAW_DASHBOARD_QUERIES[name]?.(c, range));
      if (shown !== raw) out.push(`${label} rollups: ${name} (${source}) differs from the raw tables`);
    }
    await endReadSnapshot(c);
  } finally {
    c.release();
  }
  return out;
}
