import { createHash } from 'node:crypto';
import { dayLoad } from '../../../src/common/load-target.ts';
import { CrsError } from '../../../src/errors.ts';
import { type LoadSummary, runLoad } from '../../../src/ingest/merge/load.ts';
import type { Logger } from '../../../src/log.ts';
import { Rng } from '../../../src/simulator/prng.ts';
import { markDayRunning } from '../../../src/warehouse/ledger.ts';
import type { TestWarehouse } from '../../helpers/warehouse.ts';
import { adversarialLine, oracle } from './line-reading-core.ts';

/**
 * The loader's fast paths against its slow path, on adversarial lines (line-reading-core.ts):
 * the same seeded series of intraday pulls and complete loads of one day into two warehouses,
 * one with every fast path (the quick id, the known-lines skip), one with none (each line parsed
 * before it is routed, every line merged). After each load the rows (deleted or not), the
 * rejects and the load's counts must be equal, and no row the source names (by JSON.parse, a
 * quarantined line's included) may be deleted. Used by line-reading-load.test.ts and by
 * `npm run fuzz:lines` at scale.
 */

export interface LoadRoundsOptions {
  seed: number;
  rounds: number;
  /** Lines of each export, about. */
  lines: number;
  day: string;
  log: Logger;
  /** Rows per batch (default 7: many batches, partitions and checkpoints in a small load). */
  batchSize?: number;
  /** Called after each round (a progress line). */
  onRound?: (round: number, lines: number) => void;
}

export interface LoadRoundsResult {
  loads: number;
  lines: number;
  differences: string[];
}

type Mode = 'fast' | 'slow';

function sourceOf(lines: readonly Buffer[], cutAt: number | null) {
  return async (attempt: number) =>
    (async function* () {
      for (let i = 0; i < lines.length; i += 5) {
        if (cutAt !== null && attempt === 0 && i >= cutAt)
          throw new CrsError('STREAM_CUT', 'cut in the test', { retryable: true });
        yield Buffer.concat(lines.slice(i, i + 5).flatMap((l) => [l, Buffer.from('\n')]));
      }
    })();
}

async function load(
  tw: TestWarehouse,
  mode: Mode,
  opts: LoadRoundsOptions,
  loadId: string,
  lines: readonly Buffer[],
  complete: boolean,
  cutAt: number | null,
): Promise<LoadSummary> {
  await markDayRunning(tw.w.db, opts.day, loadId);
  return runLoad({
    warehouse: tw.w,
    log: opts.log,
    target: dayLoad(loadId, opts.day, !complete),
    open: sourceOf(lines, cutAt),
    knownLinesMax: mode === 'fast' ? 1_000_000 : 0,
    fastPath: mode === 'fast',
    // A guard that never holds: every delete the loader decides is made, so a wrong one shows.
    deleteGuardPct: 100,
    deleteGuardLoadPct: 100,
    batchSize: opts.batchSize ?? 7,
    parts: 3,
    maxLineBytes: 1 << 20,
    maxReopens: 2,
  });
}

async function rowsOf(tw: TestWarehouse): Promise<string> {
  const r = await tw.w.pool.query(
    `select message_id::text, record_hash, line_hash, response, extra::text, _deleted_at is not null as deleted
     from analytics_messages order by message_id`,
  );
  return JSON.stringify(r.rows);
}

async function rejectsOf(tw: TestWarehouse): Promise<string> {
  const r = await tw.w.pool.query(
    `select line_no::int, error_code, day::text, message_id::text, md5(raw) as raw
     from rejected_records order by 1, 2, 3, 4, 5`,
  );
  return JSON.stringify(r.rows);
}

function countsOf(s: LoadSummary): string {
  return JSON.stringify([s.rowsRead, s.inserted, s.updated, s.unchanged, s.rejected, s.deleted]);
}

/**
 * One export: stored lines again byte for byte (the skip's case), new adversarial lines, and lines
 * that name one record in two spellings of its key, the one JSON.parse reads last being another
 * version of a record stored byte for byte later in the same export.
 */
function exportLines(rng: Rng, opts: LoadRoundsOptions, ids: readonly string[], stored: Buffer[]): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < opts.lines; i++) {
    const r = rng.next();
    if (r < 0.35 && stored.length > 0) out.push(rng.pick(stored));
    else if (r < 0.5 && stored.length > 0) {
      // `{"Message ID":A, …, "Message\u0020ID":B}`: record B to JSON.parse; then B's stored line.
      const line = rng.pick(stored);
      const v = oracle(line);
      if (v?.messageId == null) continue;
      const a = rng.pick(ids);
      const text = line.toString('utf8');
      const other = `{"Message ID":"${a}",${text.slice(1, -1)},"Message\\u0020ID":"${v.messageId}","v":${i}}`;
      out.push(Buffer.from(other));
      if (rng.chance(0.8)) out.push(line);
    } else out.push(adversarialLine(rng, opts.day, ids).bytes);
  }
  return out;
}

/** Ids JSON.parse reads from the lines' own objects: their rows must not be deleted by a complete load. */
function namedIds(lines: readonly Buffer[]): Set<string> {
  const ids = new Set<string>();
  for (const l of lines) {
    const v = oracle(l);
    if (v?.messageId != null) ids.add(v.messageId);
  }
  return ids;
}

export async function loadRounds(
  fast: TestWarehouse,
  slow: TestWarehouse,
  opts: LoadRoundsOptions,
): Promise<LoadRoundsResult> {
  const rng = new Rng(opts.seed);
  const ids = Array.from({ length: 40 }, (_, i) => {
    const h = (opts.seed * 7919 + i * 104729).toString(16).padStart(12, '0').slice(-12);
    return `00000000-0000-4000-8000-${h}`;
  });
  const differences: string[] = [];
  let stored: Buffer[] = [];
  let lines = 0;
  let loads = 0;
  for (let round = 0; round < opts.rounds && differences.length === 0; round++) {
    const exported = exportLines(rng, opts, ids, stored);
    lines += exported.length;
    const complete = round % 3 === 2;
    const cutAt = rng.chance(0.3) ? rng.int(exported.length) : null;
    const loadId = `reading-${round}`;
    const a = await load(fast, 'fast', opts, loadId, exported, complete, cutAt);
    const b = await load(slow, 'slow', opts, loadId, exported, complete, cutAt);
    loads++;
    const what = `seed ${opts.seed}, round ${round} (${complete ? 'complete' : 'intraday'}${cutAt === null ? '' : `, cut at ${cutAt}`})`;
    if (countsOf(a) !== countsOf(b)) differences.push(`${what}: counts ${countsOf(a)} vs ${countsOf(b)}`);
    const [ra, rb] = [await rowsOf(fast), await rowsOf(slow)];
    if (ra !== rb) differences.push(`${what}: rows differ`);
    const [ja, jb] = [await rejectsOf(fast), await rejectsOf(slow)];
    if (ja !== jb) differences.push(`${what}: rejects differ`);
    if (complete) {
      const named = namedIds(exported);
      const deleted = await fast.w.pool.query<{ id: string }>(
        'select message_id::text as id from analytics_messages where _deleted_at is not null and message_id = any($1::uuid[])',
        [[...named]],
      );
      if (deleted.rows.length > 0)
        differences.push(
          `${what}: ${deleted.rows.length} row(s) deleted that the source names, e.g. ${deleted.rows[0]?.id}`,
        );
    }
    // The lines the warehouse now holds byte for byte come back in later exports.
    const held = await fast.w.pool.query<{ h: string }>(
      'select line_hash as h from analytics_messages where _deleted_at is null',
    );
    const hashes = new Set(held.rows.map((r) => r.h));
    stored = [...stored, ...exported].filter((l) => hashes.has(createHash('sha1').update(l).digest('hex')));
    stored = [...new Map(stored.map((l) => [l.toString('latin1'), l])).values()].slice(-200);
    opts.onRound?.(round, lines);
  }
  return { loads, lines, differences };
}
