import { createHash } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDayLoad } from '../../src/common/load-target.ts';
import { CrsError } from '../../src/errors.ts';
import { KnownLines, readKnownLines } from '../../src/ingest/merge/known-lines.ts';
import { type LoadSummary, runLoad } from '../../src/ingest/merge/load.ts';
import { createLogger } from '../../src/log.ts';
import { Rng } from '../../src/simulator/prng.ts';
import { markDayRunning } from '../../src/warehouse/ledger.ts';
import { type FakeRecord, makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { messageRows } from '../helpers/load-files.ts';
import { rollupRows } from '../helpers/rollups.ts';
import { testSeed } from '../helpers/seed.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * An intraday pull skips the lines the warehouse holds byte for byte (known-lines.ts, decision
 * 0017). The skip must change nothing but the cost: seeded rounds of pulls of one open day, each
 * made twice, with the skip and without it (every line through the merge, as before), into two
 * warehouses; after each round the rows, the load's counts (per day too), the rejects and the
 * rollups must be equal. The exports change between rounds as an open day's do and beyond:
 * new records, changed ones, a key changed by an earlier line and restored by a later one of the
 * same pull, a line twice, the same record in other bytes, records of another day, rows missing,
 * bad lines, a row marked deleted since, lines reordered; some pulls are cut (the stream reopened)
 * or die and are run again (resumed from their checkpoints). The seed is printed
 * (KNOWN_LINES_SEED=… replays it).
 */
const SEED = testSeed(20261128, 'KNOWN_LINES_SEED');
const DAY = '2026-11-10';
const NEXT = '2026-11-11';
const ROUNDS = 12;

/** Debug lines of the loader: how many lines each run of a load skipped. */
const skippedBy: number[] = [];
let taken = 0;
/** Lines skipped by the runs logged since the last call. */
function skippedLately(): number {
  const n = skippedBy.slice(taken).reduce((x, y) => x + y, 0);
  taken = skippedBy.length;
  return n;
}
const log = createLogger({
  level: 'debug',
  pretty: false,
  destination: new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) {
        if (!line.includes('every line merged')) continue;
        const o = JSON.parse(line) as { skipped?: number };
        skippedBy.push(o.skipped ?? 0);
      }
      done();
    },
  }),
});

const changed = (r: FakeRecord, what: string): FakeRecord => ({ ...r, Response: `${r.Response}| ${what}` });
/** The same record in other bytes: parsed, and unchanged by its record hash. */
const reordered = (r: FakeRecord): string => JSON.stringify(Object.fromEntries(Object.entries(r).reverse()));

type Fault = { kind: 'none' } | { kind: 'cut'; atLine: number } | { kind: 'die'; atLine: number };

/** The export as chunks of a few lines, cut (retryably, the stream reopened) or failed at `atLine` on the first opening. */
function source(lines: string[], fault: Fault, firstRun: boolean) {
  return async (attempt: number) =>
    (async function* () {
      for (let i = 0; i < lines.length; i += 7) {
        if (firstRun && attempt === 0 && fault.kind !== 'none' && i >= fault.atLine) {
          if (fault.kind === 'cut') throw new CrsError('STREAM_CUT', 'cut in the test', { retryable: true });
          throw new Error('the worker died in the test');
        }
        yield Buffer.from(toJsonl(lines.slice(i, i + 7)));
      }
    })();
}

async function pull(
  tw: TestWarehouse,
  loadId: string,
  lines: string[],
  fault: Fault,
  knownLines: boolean,
): Promise<LoadSummary> {
  const run = (firstRun: boolean) =>
    runLoad({
      warehouse: tw.w,
      log,
      target: openDayLoad(loadId, DAY),
      open: source(lines, fault, firstRun),
      knownLinesMax: knownLines ? 1000 : 0,
      batchSize: 9,
      parts: 3,
      maxLineBytes: 1 << 20,
      maxReopens: 2,
    });
  await markDayRunning(tw.w.db, DAY, loadId);
  if (fault.kind !== 'die') return run(true);
  await expect(run(true)).rejects.toThrow('the worker died in the test');
  return run(false);
}

async function rejects(tw: TestWarehouse, loadId: string): Promise<unknown[]> {
  const r = await tw.w.pool.query(
    // One open reject per line: the rows this pull read last, and how many pulls read each.
    `select line_no::int, error_code, day::text, times_seen::int, _load_id from rejected_records
     where last_load_id = $1 order by line_digest`,
    [loadId],
  );
  return r.rows;
}

function countsOf(s: LoadSummary) {
  return {
    rowsRead: s.rowsRead,
    inserted: s.inserted,
    updated: s.updated,
    unchanged: s.unchanged,
    rejected: s.rejected,
    days: s.days.map((d) => [d.day, d.rowsRead, d.inserted, d.updated, d.unchanged]).sort(),
  };
}

describe('known lines (the open day by content)', () => {
  it('when digests share their first word, then each is found by all 20 bytes, and a key routed is never found again', () => {
    // Three digests with the same first 4 bytes (one probe chain), their ids' last 32 bits apart.
    const digest = (n: number) => {
      const d = createHash('sha1').update(`d${n}`).digest();
      d.writeUInt32LE(0xabcdef01, 0);
      return d;
    };
    const ids = [
      '00000000-0000-4000-a000-000000000011',
      '00000000-0000-4000-a000-0000000a0022',
      'ffffffff-0000-4000-a000-00000fff0033',
    ];
    const tails = ids.map((id) => Number.parseInt(id.slice(-8), 16));
    const rows = Buffer.concat(
      [0, 1, 2].map((i) => {
        const tail = Buffer.alloc(4);
        tail.writeUInt32BE(tails[i] as number);
        return Buffer.concat([digest(i), tail]);
      }),
    );
    const k = new KnownLines(rows);
    expect(k.size).toBe(3);
    expect([0, 1, 2].map((i) => k.find(digest(i)))).toEqual(tails);
    // The same first word, another digest: not held.
    expect(k.find(digest(3))).toBe(-1);
    expect(k.find(createHash('sha1').update('other').digest())).toBe(-1);
    k.route(ids[1] as string);
    expect([0, 1, 2].map((i) => k.find(digest(i)))).toEqual([tails[0], -1, tails[2]]);
  });

  describe('an intraday pull with the skip against the same pull without it (Postgres)', () => {
    let withSkip: TestWarehouse;
    let without: TestWarehouse;
    beforeAll(async () => {
      console.log(`known-lines: seed ${SEED} (KNOWN_LINES_SEED=${SEED} replays it)`);
      [withSkip, without] = await Promise.all([
        createTestWarehouse({ prefix: 'known' }),
        createTestWarehouse({ prefix: 'known_off' }),
      ]);
    });
    afterAll(async () => {
      await Promise.all([withSkip?.dispose(), without?.dispose()]);
    });

    it('when seeded rounds of exports change, repeat, reorder and lose lines, and pulls are cut or die, then rows, counts, rejects and rollups are those of merging every line', async () => {
      const rand = new Rng(SEED);
      const pool = makeRecords(400, { seed: `known-${SEED}`, day: DAY, threads: 37 });
      const other = makeRecords(30, { seed: `known-next-${SEED}`, day: NEXT, threads: 5 });
      let current = new Map<string, string>(); // id -> the line the export holds now
      let visible = 60;
      let version = 0;
      const skips: number[] = [];
      const skipsOff: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        visible = Math.min(pool.length, visible + 20 + rand.int(40));
        const next = new Map<string, string>();
        for (const r of pool.slice(0, visible)) {
          const had = current.get(r['Message ID']);
          // Rows missing from this pull (removed upstream, or not there yet): a partial pull keeps them.
          if (had !== undefined && rand.chance(0.03)) continue;
          if (had === undefined || rand.chance(0.05))
            next.set(r['Message ID'], JSON.stringify(changed(r, `v${version++}`)));
          else next.set(r['Message ID'], had);
        }
        current = next;
        const lines = [...current.values()];
        // Lines reordered now and then (the export promises no order).
        if (rand.chance(0.5)) lines.sort(() => rand.next() - 0.5);
        const ids = [...current.keys()];
        const pick = () => ids[rand.int(ids.length)] as string;
        for (let e = 0; e < 3; e++) {
          // A key changed by an earlier line and restored by a later one of the same pull: the
          // later (stored, known) line must win.
          const id = pick();
          const rec = JSON.parse(current.get(id) as string) as FakeRecord;
          lines.splice(rand.int(lines.length / 2), 0, JSON.stringify(changed(rec, `early ${version++}`)));
          // The reverse: the stored line first, a changed one after it.
          const id2 = pick();
          const rec2 = JSON.parse(current.get(id2) as string) as FakeRecord;
          lines.push(JSON.stringify(changed(rec2, `late ${version++}`)));
          current.set(id2, lines.at(-1) as string);
          // A line twice, and the same record in other bytes.
          lines.splice(rand.int(lines.length), 0, current.get(pick()) as string);
          lines.splice(rand.int(lines.length), 0, reordered(JSON.parse(current.get(pick()) as string)));
        }
        // Records of another day, and lines that are no record.
        lines.splice(rand.int(lines.length), 0, ...other.slice(0, 5 + round).map((r) => JSON.stringify(r)));
        lines.splice(rand.int(lines.length), 0, '{"Message ID": "not a record"', 'null');
        // A row of the day marked deleted since the last pull (as a delete would), in both.
        if (round > 0 && rand.chance(0.5)) {
          const id = pick();
          for (const tw of [withSkip, without])
            await tw.w.pool.query('update analytics_messages set _deleted_at = now() where message_id = $1', [
              id,
            ]);
        }
        const roll = rand.int(4);
        const atLine = rand.int(lines.length);
        const fault: Fault =
          round === 0 || roll === 0
            ? { kind: 'none' }
            : roll === 1
              ? { kind: 'cut', atLine }
              : { kind: 'die', atLine };
        const loadId = `pull-${round}`;
        const a = await pull(withSkip, loadId, lines, fault, true);
        skips.push(fault.kind === 'die' ? -1 : skippedLately());
        skippedLately();
        const b = await pull(without, loadId, lines, fault, false);
        skipsOff.push(skippedLately());
        const what = `seed ${SEED}, round ${round}, ${fault.kind}`;
        expect(countsOf(a), what).toEqual(countsOf(b));
        expect(await messageRows(withSkip), what).toEqual(await messageRows(without));
        expect(await rejects(withSkip, loadId), what).toEqual(await rejects(without, loadId));
        expect(await rollupRows(withSkip), what).toEqual(await rollupRows(without));
      }
      // The skip ran from the second pull on (-1: a pull that died, whose run again skips only
      // what its first run had not committed).
      console.log(`known-lines: lines skipped per pull (seed ${SEED}): ${skips.join(', ')}`);
      expect(skips[0]).toBe(0);
      const whole = skips.slice(1).filter((n) => n >= 0);
      expect(whole.every((n) => n > 0)).toBe(true);
      expect(whole.reduce((x, y) => x + y, 0)).toBeGreaterThan(20 * whole.length);
      expect(skipsOff.every((n) => n === 0)).toBe(true);
    });

    it('when the read of the known lines fails, then the pull fails and holds none of its connections', async () => {
      const tw = await createTestWarehouse({ prefix: 'known_fail' });
      try {
        const lines = makeRecords(20, { seed: 'fail', day: DAY }).map((r) => JSON.stringify(r));
        await pull(tw, 'first', lines, { kind: 'none' }, true);
        // The column the read needs is gone: its query fails before any line is merged.
        await tw.w.pool.query('alter table analytics_messages rename column line_hash to line_hash_gone');
        await expect(pull(tw, 'second', lines, { kind: 'none' }, true)).rejects.toThrow(/line_hash/);
        const pool = tw.w.pool;
        expect(pool.totalCount - pool.idleCount).toBe(0);
      } finally {
        await tw.dispose();
      }
    });

    it('when deletes are held (the load notes the ids it reads), then an intraday pull skips nothing', async () => {
      const tw = await createTestWarehouse({ prefix: 'known_held' });
      try {
        const lines = makeRecords(40, { seed: 'held', day: DAY }).map((r) => JSON.stringify(r));
        await pull(tw, 'first', lines, { kind: 'none' }, true);
        expect(skippedLately()).toBe(0);
        await pull(tw, 'second', lines, { kind: 'none' }, true);
        expect(skippedLately()).toBe(40);
        // A delete held on another day: every load notes its ids, so none may be skipped.
        await tw.w.pool.query(
          `insert into held_deletes (day, message_id, load_id) values ('2026-11-01', gen_random_uuid(), 'x')`,
        );
        const s = await pull(tw, 'third', lines, { kind: 'none' }, true);
        expect(skippedLately()).toBe(0);
        expect(s).toMatchObject({ rowsRead: 40, unchanged: 40 });
      } finally {
        await tw.dispose();
      }
    });

    it("when the day has no live row, more than the bound or a row marked deleted, then the table is none, none, or the live rows with the loader's hashes", async () => {
      const tw = await createTestWarehouse({ prefix: 'known_none' });
      try {
        const recs = makeRecords(30, { seed: 'none', day: DAY });
        // No live row yet: no table (the first pull reads nothing).
        const c = await tw.w.pool.connect();
        try {
          expect(await readKnownLines(c, DAY)).toBeNull();
          const lines = recs.map((r) => JSON.stringify(r));
          await pull(tw, 'first', lines, { kind: 'none' }, true);
          const k = await readKnownLines(c, DAY);
          expect(k?.size).toBe(30);
          // Over its bound: none, the lookups as before.
          expect(await readKnownLines(c, DAY, 29)).toBeNull();
          // A row marked deleted is not known: its line must bring it back.
          await c.query('update analytics_messages set _deleted_at = now() where message_id = $1', [
            recs[0]?.['Message ID'],
          ]);
          expect((await readKnownLines(c, DAY))?.size).toBe(29);
          // A hash that is not the loader's (written by hand): left out, the rest kept.
          await c.query(`update analytics_messages set line_hash = repeat('z', 40) where message_id = $1`, [
            recs[1]?.['Message ID'],
          ]);
          expect((await readKnownLines(c, DAY))?.size).toBe(28);
        } finally {
          c.release();
        }
      } finally {
        await tw.dispose();
      }
    });
  });
});
