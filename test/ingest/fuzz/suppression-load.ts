import { dayLoad } from '../../../src/common/load-target.ts';
import { CrsError } from '../../../src/errors.ts';
import { type LoadSummary, runLoad } from '../../../src/ingest/merge/load.ts';
import type { Logger } from '../../../src/log.ts';
import { Rng } from '../../../src/simulator/prng.ts';
import { markDayRunning } from '../../../src/warehouse/ledger.ts';
import { forget } from '../../../src/warehouse/privacy/forget.ts';
import { refreshRollups } from '../../../src/warehouse/rollups/refresh.ts';
import { uuidFrom } from '../../helpers/export-lines.ts';
import { rollupRows } from '../../helpers/rollups.ts';
import type { TestWarehouse } from '../../helpers/warehouse.ts';

/**
 * The loader's fast paths against its slow path while users and threads are erased between loads
 * (`crs-sync forget` through its module function, the same erasures in both warehouses). One day
 * of a small population of users and threads is pulled again and again (intraday pulls with the
 * known-lines skip, complete loads, loads cut and reopened, loads that fail and are resumed after
 * an erasure), with lines built to make the two paths part ways: records of erased users mixed
 * with others, erased ids respelled with JSON escapes or in upper case (the id JSON.parse reads is
 * the one erased), a thread erased while its user is not, quarantined lines naming erased ids
 * (plainly or escaped), lines stored byte for byte before their user was erased (the fast path
 * finds no stored row for them now). After each load: equal rows, threads, rejects, counts
 * (suppressed included), ledger and rollups, and no table of either warehouse holds an erased id
 * (a quarantined line's escapes decoded). Used by suppression-load.test.ts.
 */

export interface SuppressionRoundsOptions {
  seed: number;
  rounds: number;
  day: string;
  log: Logger;
  /** Rows per batch (default 5: many batches, partitions and checkpoints in a small load). */
  batchSize?: number;
}

export interface SuppressionRoundsResult {
  loads: number;
  erasures: { users: number; threads: number };
  /** Lines the loads counted suppressed, and lines of erased ids each export held. */
  suppressed: number;
  differences: string[];
}

type Mode = 'fast' | 'slow';

/** One version of a record, and how its line spells it (kept while the version is). */
interface Rec {
  m: string;
  t: string;
  u: string;
  hh: number;
  v: number;
  spelling: number;
}

const SPELLINGS = 7;

/** `id` with some of its characters (all when `all`) written as `\u00XX`, hex in either case. */
function escapedId(rng: Rng, id: string, all: boolean): string {
  let out = '';
  for (const ch of id) {
    if (all || rng.chance(0.3)) {
      const hex = ch.charCodeAt(0).toString(16).padStart(4, '0');
      out += `\\u${rng.chance(0.5) ? hex : hex.toUpperCase()}`;
    } else out += ch;
  }
  // At least one escape: the bytes must not hold the plain id.
  return out === id ? `\\u${id.charCodeAt(0).toString(16).padStart(4, '0')}${id.slice(1)}` : out;
}

/**
 * A record's line. The spelling is drawn with the version and the line is built from a generator
 * seeded by both, so a version keeps its bytes from export to export (the fast paths' case).
 * 0: plain; 1: the user id escaped; 2: the thread id escaped; 3: the user id in upper case;
 * 4: the message id escaped (no quick id); 5: the key `User ID` escaped; 6: both ids escaped.
 */
function lineOf(r: Rec, seed: number): string {
  const rng = new Rng((seed ^ Number.parseInt(r.m.slice(-7), 16) ^ (r.v * 7919)) >>> 0);
  const q = (s: string) => JSON.stringify(s);
  const m = r.spelling === 4 ? `"${escapedId(rng, r.m, false)}"` : q(r.m);
  const t = r.spelling === 2 || r.spelling === 6 ? `"${escapedId(rng, r.t, rng.chance(0.3))}"` : q(r.t);
  const u =
    r.spelling === 1 || r.spelling === 6
      ? `"${escapedId(rng, r.u, rng.chance(0.3))}"`
      : r.spelling === 3
        ? q(r.u.toUpperCase())
        : q(r.u);
  const userKey = r.spelling === 5 ? '"User\\u0020ID"' : '"User ID"';
  const time = `2026-11-10T${String(r.hh).padStart(2, '0')}:${String(r.v % 60).padStart(2, '0')}:00Z`;
  return `{"Message ID":${m},"Message Time":${q(time)},"Thread ID":${t},${userKey}:${u},"Input":${q(`question ${r.m.slice(0, 4)}`)},"Response":${q(`answer v${r.v}`)}}`;
}

/**
 * A line the loader quarantines that names a record's user and thread: its time is not a time
 * (the ids as JSON.parse reads them, plainly or escaped), or it is cut short (not JSON at all).
 */
function rejectLine(rng: Rng, r: Rec, seed: number): string {
  const line = lineOf({ ...r, spelling: rng.pick([0, 1, 2, 3, 6, 6]) }, seed);
  if (rng.chance(0.3)) return line.slice(0, line.indexOf('"Input"'));
  return line.replace(/"Message Time":"[^"]*"/, '"Message Time":"yesterday"');
}

function sourceOf(lines: readonly string[], cutAt: number | null) {
  return async (attempt: number) =>
    (async function* () {
      for (let i = 0; i < lines.length; i += 4) {
        if (cutAt !== null && attempt === 0 && i >= cutAt)
          throw new CrsError('STREAM_CUT', 'cut in the test', { retryable: true });
        yield Buffer.from(`${lines.slice(i, i + 4).join('\n')}\n`);
      }
    })();
}

async function load(
  tw: TestWarehouse,
  mode: Mode,
  opts: SuppressionRoundsOptions,
  loadId: string,
  lines: readonly string[],
  complete: boolean,
  cut: { at: number; reopens: number } | null,
): Promise<LoadSummary> {
  await markDayRunning(tw.w.db, opts.day, loadId);
  return runLoad({
    warehouse: tw.w,
    log: opts.log,
    target: dayLoad(loadId, opts.day, !complete),
    open: sourceOf(lines, cut?.at ?? null),
    knownLinesMax: mode === 'fast' ? 1_000_000 : 0,
    fastPath: mode === 'fast',
    // A guard that never holds: every delete the loader decides is made, so a wrong one shows.
    deleteGuardPct: 100,
    deleteGuardLoadPct: 100,
    batchSize: opts.batchSize ?? 5,
    parts: 3,
    maxLineBytes: 1 << 20,
    maxReopens: cut?.reopens ?? 2,
  });
}

function countsOf(s: LoadSummary): string {
  return JSON.stringify({
    read: s.rowsRead,
    inserted: s.inserted,
    updated: s.updated,
    unchanged: s.unchanged,
    rejected: s.rejected,
    suppressed: s.suppressed,
    deleted: s.deleted,
    queued: s.threadsQueued,
  });
}

async function json(tw: TestWarehouse, sql: string, values: unknown[] = []): Promise<string> {
  return JSON.stringify((await tw.w.pool.query(sql, values)).rows);
}

/** What both warehouses must agree on after a load, by name. */
async function stateOf(tw: TestWarehouse, day: string, counted: boolean): Promise<Record<string, string>> {
  await refreshRollups(tw.w.pool);
  return {
    rows: await json(
      tw,
      `select message_id::text, thread_id::text, user_id::text, record_hash, line_hash, response,
              _deleted_at is not null as deleted
         from analytics_messages order by message_id`,
    ),
    threads: await json(tw, 'select thread_id::text, user_id::text from threads order by 1'),
    queue: await json(tw, 'select distinct thread_id::text from thread_queue order by 1'),
    rejects: await json(
      tw,
      `select line_no::int, error_code, day::text, message_id::text, md5(raw) as raw
         from rejected_records order by 1, 2, 3, 4, 5`,
    ),
    // A load resumed after an erasure counts what its first attempt committed before it; which
    // lines that was follows the batches' bounds, which the known-lines skip moves.
    ...(counted
      ? {
          ledger: await json(
            tw,
            `select status, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected,
                    rows_suppressed, rows_deleted from sync_days where day = $1`,
            [day],
          ),
          runs: await json(
            tw,
            `select load_id, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected,
                    rows_suppressed from sync_runs order by load_id`,
          ),
        }
      : {}),
    rollups: JSON.stringify(await rollupRows(tw)),
  };
}

/**
 * Every row of every table of the warehouse (data and internal schema) whose text names one of
 * `ids`, a quarantined line's `\uXXXX` escapes decoded first (JSON.parse would read the id).
 */
async function erasedIdsHeld(tw: TestWarehouse, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const tables = await tw.w.pool.query<{ s: string; t: string }>(
    `select table_schema as s, table_name as t from information_schema.tables
      where table_schema in ($1::text, $1::text || '_internal') and table_type = 'BASE TABLE'`,
    [tw.schema],
  );
  const found: string[] = [];
  for (const { s, t } of tables.rows) {
    const r = await tw.w.pool.query<{ x: string }>(`select x::text as x from "${s}"."${t}" x`);
    for (const { x } of r.rows) {
      const text = decodeEscapes(x).toLowerCase();
      const id = ids.find((i) => text.includes(i));
      if (id) found.push(`${t} holds ${id}`);
    }
  }
  return found;
}

/** `\uXXXX` escapes decoded (a row's text doubles a backslash of its values: either form). */
function decodeEscapes(s: string): string {
  return s.replace(/\\{1,2}u([0-9a-fA-F]{4})/g, (_, h: string) =>
    String.fromCharCode(Number.parseInt(h, 16)),
  );
}

/** The population: users, threads each of one user, and the day's records (their current versions). */
class Population {
  readonly users: string[];
  readonly threadUser = new Map<string, string>();
  readonly records: Rec[] = [];
  /** Older versions of records, repeated before their current one now and then. */
  readonly older: Rec[] = [];
  readonly rejects: string[] = [];
  readonly erasedUsers = new Set<string>();
  readonly erasedThreads = new Set<string>();
  private next = 0;

  private readonly rng: Rng;
  private readonly seed: number;

  constructor(rng: Rng, seed: number) {
    this.rng = rng;
    this.seed = seed;
    this.users = Array.from({ length: 6 }, (_, i) => uuidFrom(`${seed}:u:${i}`));
    for (let i = 0; i < 14; i++) this.threadUser.set(uuidFrom(`${seed}:t:${i}`), this.users[i % 6] as string);
  }

  /** New records, new versions of some (respelled or not), new quarantined lines. */
  grow(): void {
    const threads = [...this.threadUser.keys()];
    for (let n = this.rng.range(4, 10); n > 0; n--) {
      const t = this.rng.pick(threads);
      this.records.push({
        m: uuidFrom(`${this.seed}:m:${this.next++}`),
        t,
        u: this.threadUser.get(t) as string,
        hh: this.rng.int(24),
        v: 0,
        spelling: this.rng.chance(0.5) ? 0 : this.rng.int(SPELLINGS),
      });
    }
    for (const r of this.records) {
      if (!this.rng.chance(0.12)) continue;
      this.older.push({ ...r });
      r.v++;
      if (this.rng.chance(0.4)) r.spelling = this.rng.int(SPELLINGS);
    }
    if (this.rng.chance(0.6) && this.records.length > 0) {
      // Of a stored record, or of a message never stored (only the ids of its user and thread
      // name whose it is).
      const r = this.rng.pick(this.records);
      const m = this.rng.chance(0.5) ? r.m : uuidFrom(`${this.seed}:rejected:${this.next++}`);
      this.rejects.push(rejectLine(this.rng, { ...r, m }, this.seed));
    }
  }

  /** The day's export: every record, older versions before some, the quarantined lines among them. */
  exportLines(): string[] {
    const out: string[] = [];
    for (const r of this.records) {
      if (this.rng.chance(0.08)) {
        const old = this.older.filter((o) => o.m === r.m);
        if (old.length > 0) out.push(lineOf(this.rng.pick(old), this.seed));
      }
      out.push(lineOf(r, this.seed));
    }
    for (const j of this.rejects) out.splice(this.rng.int(out.length + 1), 0, j);
    return out;
  }

  /** An erasure to make before the next load, or null: a user, or a thread of a user not erased. */
  drawErasure(): { users: string[]; threads: string[] } | null {
    const r = this.rng.next();
    if (r < 0.3) {
      const left = this.users.filter((u) => !this.erasedUsers.has(u));
      if (left.length <= 2) return null;
      const u = this.rng.pick(left);
      this.erasedUsers.add(u);
      return { users: [this.rng.chance(0.3) ? u.toUpperCase() : u], threads: [] };
    }
    if (r < 0.55) {
      const left = [...this.threadUser].filter(
        ([t, u]) => !this.erasedUsers.has(u) && !this.erasedThreads.has(t),
      );
      if (left.length <= 4) return null;
      const [t] = this.rng.pick(left);
      this.erasedThreads.add(t);
      return { users: [], threads: [t] };
    }
    return null;
  }

  /** Every id erased: the users, their threads, the threads erased alone. */
  erasedIds(): string[] {
    const threads = [...this.threadUser].filter(
      ([t, u]) => this.erasedUsers.has(u) || this.erasedThreads.has(t),
    );
    return [...this.erasedUsers, ...threads.map(([t]) => t)];
  }

  /** Lines of the export that name an erased user or thread (as JSON.parse reads them). */
  erasedLines(lines: readonly string[]): number {
    const erased = new Set(this.erasedIds());
    let n = 0;
    for (const l of lines) {
      try {
        const o = JSON.parse(l) as Record<string, unknown>;
        const u = String(o['User ID']).toLowerCase();
        if (erased.has(u) || erased.has(String(o['Thread ID']).toLowerCase())) n++;
      } catch {
        // a cut line: not counted here
      }
    }
    return n;
  }
}

/** One round: an erasure or none, then the same load of the day into both warehouses, compared. */
export async function suppressionRounds(
  fast: TestWarehouse,
  slow: TestWarehouse,
  opts: SuppressionRoundsOptions,
): Promise<SuppressionRoundsResult> {
  const rng = new Rng(opts.seed);
  const pop = new Population(rng, opts.seed);
  const res: SuppressionRoundsResult = {
    loads: 0,
    erasures: { users: 0, threads: 0 },
    suppressed: 0,
    differences: [],
  };
  const both = [
    { tw: fast, mode: 'fast' as const },
    { tw: slow, mode: 'slow' as const },
  ];
  for (let round = 0; round < opts.rounds && res.differences.length === 0; round++) {
    pop.grow();
    const lines = pop.exportLines();
    const complete = round % 4 === 3;
    const loadId = `supp-${round}`;
    // A load that fails once cut (no reopen), is resumed after the erasure; else cut and reopened now and then.
    const failing = round > 0 && rng.chance(0.25);
    // A failing load's cut falls on a piece the source yields (they start every 4 lines), or
    // the load would end whole.
    const cut = failing
      ? { at: Math.min(rng.int(lines.length), 4 * Math.floor((lines.length - 1) / 4)), reopens: 0 }
      : rng.chance(0.25)
        ? { at: rng.int(lines.length), reopens: 2 }
        : null;
    if (failing) {
      for (const { tw, mode } of both) {
        const failed = await load(tw, mode, opts, loadId, lines, complete, cut).then(
          () => null,
          (err: unknown) => err,
        );
        if (!(failed instanceof CrsError && failed.code === 'STREAM_CUT'))
          res.differences.push(
            `seed ${opts.seed}, round ${round}: the cut load failed with ${String(failed)}`,
          );
      }
    }
    const erasure = round > 0 ? pop.drawErasure() : null;
    if (erasure) {
      for (const { tw } of both) await forget(tw.w.pool, erasure, { reason: `round ${round}` });
      res.erasures.users += erasure.users.length;
      res.erasures.threads += erasure.threads.length;
      // The erasure itself leaves nothing of them, before any load drops their lines.
      for (const { tw, mode } of both)
        for (const held of (await erasedIdsHeld(tw, pop.erasedIds())).slice(0, 3))
          res.differences.push(
            `seed ${opts.seed}, round ${round}: after the erasure, the ${mode} warehouse: ${held}`,
          );
    }
    const [a, b] = [
      await load(fast, 'fast', opts, loadId, lines, complete, failing ? null : cut),
      await load(slow, 'slow', opts, loadId, lines, complete, failing ? null : cut),
    ];
    res.loads++;
    res.suppressed += a.suppressed;
    const what = `seed ${opts.seed}, round ${round} (${complete ? 'complete' : 'intraday'}${cut ? `, cut at ${cut.at}${failing ? ', failed and resumed' : ''}` : ''}${erasure ? `, after erasing ${erasure.users.length ? 'a user' : 'a thread'}` : ''})`;
    const counted = !(failing && erasure);
    if (counted && countsOf(a) !== countsOf(b))
      res.differences.push(`${what}: counts ${countsOf(a)} vs ${countsOf(b)}`);
    if (!failing) {
      const expected = pop.erasedLines(lines);
      if (a.suppressed < expected)
        res.differences.push(
          `${what}: ${a.suppressed} suppressed, but the export holds ${expected} records of erased ids`,
        );
    }
    const [sa, sb] = [await stateOf(fast, opts.day, counted), await stateOf(slow, opts.day, counted)];
    for (const k of Object.keys(sa)) if (sa[k] !== sb[k]) res.differences.push(`${what}: ${k} differ`);
    for (const { tw, mode } of both)
      for (const held of (await erasedIdsHeld(tw, pop.erasedIds())).slice(0, 3))
        res.differences.push(`${what}: the ${mode} warehouse: ${held}`);
  }
  return res;
}
