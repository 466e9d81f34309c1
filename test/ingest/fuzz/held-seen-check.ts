import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../../../src/config.ts';
import type { LoadSummary } from '../../../src/ingest/merge/load.ts';
import { importFile } from '../../../src/ingest/source/import-file.ts';
import type { Logger } from '../../../src/log.ts';
import { Rng } from '../../../src/simulator/prng.ts';
import type { Warehouse } from '../../../src/warehouse/db.ts';
import { applyHeldDeletes, listHeldDeletes } from '../../../src/warehouse/held-deletes.ts';
import { type FakeRecord, makeRecords } from '../../helpers/export-lines.ts';
import type { FuzzTally } from './loader-fuzz-core.ts';

/**
 * The fuzz run's "held, then seen again" case (decision 0008, items 5 to 10): a day imported in
 * full as its complete export; then a partial export of it, declared complete, with more than
 * CRS_DELETE_GUARD percent of its rows missing, so that the deletes are held; then one or two
 * later loads that see some or all of the held ids again (`only`: one later load of that kind);
 * then `deletes apply`. Expected: no row
 * a later load saw (as a row or as a quarantined line with a readable id) is deleted, `list`'s
 * `applicable` is what `apply` deletes, and the day's deleted rows are exactly the held ids no
 * later load saw. The sizes, which ids come back, and how each later load sees them follow the seed.
 */

const HELD_DAY = '2026-10-28';

/** How a later load sees held ids again. */
export type LaterLoad =
  /** The lines as they were, imported without --from/--to. */
  | 'unchanged'
  /** Each held id's line with another Response, imported without --from/--to. */
  | 'changed'
  /** The day's complete export (--from/--to) lacking at most CRS_DELETE_GUARD percent: applied, not held. */
  | 'complete'
  /** Declared complete but without its final newline: not known complete, so nothing deleted. */
  | 'incomplete'
  /** Some held ids as lines the loader quarantines, whose id it can still read. */
  | 'quarantined';

export const LATER_LOADS: readonly LaterLoad[] = [
  'unchanged',
  'changed',
  'complete',
  'incomplete',
  'quarantined',
];

export interface HeldSeenTally {
  checks: number;
  held: number;
  seenAgain: number;
  deletedByApply: number;
  byLater: Map<LaterLoad, number>;
}

export function newHeldSeenTally(): HeldSeenTally {
  return { checks: 0, held: 0, seenAgain: 0, deletedByApply: 0, byLater: new Map() };
}

interface Step {
  kind: LaterLoad;
  /** Indexes of the records the step's file holds. */
  ids: number[];
  /** Of them, the ones written as quarantined lines. */
  bad: Set<number>;
}

/** The step's file: its lines, and whether it ends with a newline. */
function stepText(recs: FakeRecord[], s: Step, maxLineBytes: number, seed: number): string {
  const lines = s.ids.map((i) => {
    const r = recs[i]!;
    if (s.bad.has(i)) {
      // Both keep the id readable: a time no one can read, or a line past the limit with its id
      // beyond the prefix the quarantine keeps.
      return (seed + i) % 2 === 0
        ? JSON.stringify({ ...r, 'Message Time': 'soon' })
        : JSON.stringify(r).replace('{"Input":"', `{"Input":"${'h'.repeat(maxLineBytes)}`);
    }
    return JSON.stringify(s.kind === 'changed' ? { ...r, Response: `${r.Response} edited ${seed}` } : r);
  });
  return s.kind === 'incomplete' ? lines.join('\n') : `${lines.join('\n')}\n`;
}

function shuffled(n: number, rng: Rng): number[] {
  const a = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

/** The later loads of a seed: which kinds, and which of the day's records each one holds. */
function plan(seed: number, n: number, guardPct: number, only?: LaterLoad) {
  const rng = new Rng(seed);
  const order = shuffled(n, rng);
  const atGuard = Math.floor((n * guardPct) / 100);
  const missing = rng.range(atGuard + 1, Math.max(atGuard + 1, Math.floor(n * 0.6)));
  const held = order.slice(0, missing);
  const kept = order.slice(missing);
  // The first kind by the seed itself, so that consecutive seeds meet every kind.
  const kinds: LaterLoad[] = [only ?? LATER_LOADS[seed % LATER_LOADS.length]!];
  if (rng.chance(0.5) && only === undefined) kinds.push(rng.pick(LATER_LOADS));
  // A complete load lacking more than the guard would hold again: the ids no later load sees
  // stay within it then, and at least one held id comes back.
  const maxNever = kinds.includes('complete') ? Math.min(missing - 1, atGuard) : missing - 1;
  const never = new Set(held.slice(0, rng.range(0, maxNever)));
  const back = held.filter((i) => !never.has(i));
  const steps: Step[] = kinds.map((kind) => ({ kind, ids: [], bad: new Set() }));
  // Every id that comes back comes back in some step, and maybe in the other one too.
  for (const i of back) {
    const own = rng.int(steps.length);
    steps.forEach((s, k) => {
      if (k === own || s.kind === 'complete' || rng.chance(0.3)) s.ids.push(i);
    });
  }
  for (const s of steps) {
    if (s.kind === 'complete' || rng.chance(0.5)) s.ids.push(...kept);
    if (s.kind === 'quarantined') {
      if (!s.ids.some((i) => held.includes(i))) s.ids.push(back[0]!);
      const mine = s.ids.filter((i) => held.includes(i));
      for (const i of mine.slice(0, 1 + rng.int(mine.length))) s.bad.add(i);
    }
    if (s.ids.length === 0) s.ids.push(...kept);
  }
  return { held, kept, never, back, steps, withDays: rng.chance(0.5) };
}

async function deletedIds(w: Warehouse): Promise<Set<string>> {
  const r = await w.pool.query<{ id: string }>(
    'select message_id::text as id from analytics_messages where message_date = $1 and _deleted_at is not null',
    [HELD_DAY],
  );
  return new Set(r.rows.map((x) => x.id));
}

export async function heldSeenCheck(
  w: Warehouse,
  config: Config,
  log: Logger,
  dir: string,
  seed: number,
  tally: FuzzTally,
  only?: LaterLoad,
): Promise<void> {
  const n = 30 + (seed % 51);
  const recs = makeRecords(n, { day: HELD_DAY, seed: `held${seed}` });
  const idOf = (i: number) => recs[i]!['Message ID'];
  const p = plan(seed, n, config.deleteGuardPct, only);
  const what = `held, then seen again (seed ${seed}, ${p.held.length} of ${n} held, ${p.back.length} back; later: ${p.steps.map((s) => s.kind).join(', ')})`;
  const fail = (msg: string): never => {
    throw new Error(`${what}: ${msg}`);
  };
  const days = { from: HELD_DAY, to: HELD_DAY };
  let files = 0;
  const load = async (text: string, completeDays: typeof days | null): Promise<LoadSummary> => {
    const file = path.join(dir, `held${seed}-${files++}.jsonl`);
    writeFileSync(file, text);
    tally.imports++;
    try {
      return await importFile(w, config, log, { file, wholeDays: completeDays });
    } finally {
      rmSync(file);
    }
  };
  const count = (s: LoadSummary, lines: number) => {
    tally.lines += lines;
    tally.rows += s.rowsRead - s.rejected;
    if (s.rejected > 0)
      tally.byCode.set('held id, quarantined', (tally.byCode.get('held id, quarantined') ?? 0) + s.rejected);
  };

  const full = await load(`${recs.map((r) => JSON.stringify(r)).join('\n')}\n`, days);
  count(full, n);
  const partial = await load(`${p.kept.map((i) => JSON.stringify(recs[i])).join('\n')}\n`, days);
  count(partial, p.kept.length);
  const heldNow = partial.days.find((d) => d.day === HELD_DAY)?.deletesHeld ?? 0;
  if (heldNow !== p.held.length) fail(`the partial export held ${heldNow} deletes`);

  for (const s of p.steps) {
    const complete = s.kind === 'complete' || (s.kind === 'incomplete' && p.withDays) ? days : null;
    const r = await load(stepText(recs, s, config.maxLineBytes, seed), complete);
    count(r, s.ids.length);
    if (r.rejected !== s.bad.size)
      fail(`the ${s.kind} load quarantined ${r.rejected} lines, not ${s.bad.size}`);
  }

  const listed = await listHeldDeletes(w.db, HELD_DAY);
  const applicable = listed.reduce((a, d) => a + d.applicable, 0);
  const before = await deletedIds(w);
  const applied = await applyHeldDeletes(w.db, [HELD_DAY]);
  const deleted = applied.reduce((a, d) => a + d.deleted, 0);
  const after = await deletedIds(w);

  if (applicable !== deleted) fail(`deletes list said ${applicable} applicable, apply deleted ${deleted}`);
  const byApply = [...after].filter((id) => !before.has(id));
  if (byApply.length !== deleted) fail(`apply says ${deleted} deleted, ${byApply.length} rows were`);
  const seenAgain = new Set(p.back.map(idOf));
  const seenDeleted = [...after].filter((id) => seenAgain.has(id) || p.kept.some((i) => idOf(i) === id));
  if (seenDeleted.length > 0) {
    fail(
      `${seenDeleted.length} rows a later load saw are deleted, e.g. ${seenDeleted.slice(0, 3).join(', ')}`,
    );
  }
  const never = [...p.never].map(idOf);
  if (after.size !== never.length || never.some((id) => !after.has(id))) {
    fail(`${after.size} rows of the day are deleted; the held ids no later load saw are ${never.length}`);
  }
  const led = await w.pool.query<{ d: number; h: number }>(
    'select rows_deleted::int as d, deletes_held::int as h from sync_days where day = $1',
    [HELD_DAY],
  );
  const l0 = led.rows[0];
  if (l0?.d !== after.size || l0.h !== 0) {
    fail(`the day's ledger is ${JSON.stringify(l0)}, with ${after.size} rows deleted and nothing held`);
  }

  const h = tally.heldSeen;
  h.checks++;
  h.held += p.held.length;
  h.seenAgain += p.back.length;
  h.deletedByApply += deleted;
  for (const s of p.steps) h.byLater.set(s.kind, (h.byLater.get(s.kind) ?? 0) + 1);
}
