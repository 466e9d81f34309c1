import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { fileLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { CrsError } from '../../src/errors.ts';
import { runLoad } from '../../src/ingest/merge/load.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { type FakeRecord, makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { messageRows, tempFiles } from '../helpers/load-files.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

// The two write paths of a batch: keys the warehouse lacks are copied straight into the table,
// keys it holds go through the temporary stage and INSERT ... ON CONFLICT. A batch mixing both,
// keys twice, and resumed loads whose skipped lines must be encoded late.

const log = createLogger({ level: 'silent', pretty: false });
const file = tempFiles('crs-merge-paths-');

const opened: TestWarehouse[] = [];
async function warehouse(): Promise<TestWarehouse> {
  const tw = await createTestWarehouse();
  opened.push(tw);
  return tw;
}
afterAll(async () => {
  await Promise.all(opened.map((tw) => tw.dispose()));
});

const contentOf = messageRows;

interface Meta {
  load: string;
  line: number;
  loaded: string;
  first: string;
}
async function metaOf(tw: TestWarehouse): Promise<Map<string, Meta>> {
  const { rows } = await tw.w.pool.query<Meta & { id: string }>(
    `select message_id::text as id, _load_id as load, _source_line::int as line,
            to_char(_loaded_at, 'YYYY-MM-DD HH24:MI:SS.US') as loaded,
            to_char(_first_loaded_at, 'YYYY-MM-DD HH24:MI:SS.US') as first
     from analytics_messages`,
  );
  return new Map(rows.map(({ id, ...m }) => [id, m]));
}

/** Whether any of the pool's idle sessions holds the loader's temporary stage table. */
async function someSessionHasStage(tw: TestWarehouse): Promise<boolean> {
  const pool = tw.w.pool;
  expect(pool.waitingCount).toBe(0);
  const clients = await Promise.all(Array.from({ length: pool.idleCount }, () => pool.connect()));
  try {
    let any = false;
    for (const c of clients) {
      const { rows } = await c.query("select to_regclass('pg_temp.crs_stage_messages') is not null as s");
      any ||= rows[0].s;
    }
    return any;
  } finally {
    for (const c of clients) c.release();
  }
}

const changed = (r: FakeRecord, what: string): FakeRecord => ({ ...r, Response: `${r.Response}| ${what}` });
/** The same values in other bytes: other key order (parsed, compared by record hash). */
const reordered = (r: FakeRecord): string => JSON.stringify(Object.fromEntries(Object.entries(r).reverse()));

describe('merge paths', () => {
  it.each([
    { batch: '1000', conns: '1', shape: 'one batch' },
    { batch: '7', conns: '3', shape: 'batches of 7 over 3 partitions' },
  ])(
    'when a re-load mixes new, changed, unchanged and repeated keys ($shape), then the counts and rows are those of applying its lines in order',
    async ({ batch, conns }) => {
      const config = parseConfig({ CRS_BATCH_SIZE: batch, CRS_LOAD_PARTITIONS: conns });
      const tw = await warehouse();
      const clean = await warehouse();
      const a = makeRecords(40, { seed: `mix-a-${batch}`, day: '2026-08-03' });
      const fresh = makeRecords(15, { seed: `mix-n-${batch}`, day: '2026-08-04' });

      const first = await importFile(tw.w, config, log, { file: file(toJsonl(a)), loadId: 'mix-a' });
      expect(first).toMatchObject({ rowsRead: 40, inserted: 40, updated: 0, unchanged: 0 });
      // A first load finds no key stored: everything is copied straight in, the stage is not used.
      expect(await someSessionHasStage(tw)).toBe(false);
      const before = await metaOf(tw);

      const changedA = a.slice(0, 10).map((r, i) => changed(r, `v2 ${i}`));
      const sameA = a.slice(10, 30);
      // Round robin, so that new, changed and unchanged keys share batches.
      const lines: (FakeRecord | string)[] = [];
      for (let i = 0; i < 20; i++) {
        if (changedA[i]) lines.push(changedA[i]!);
        if (fresh[i]) lines.push(fresh[i]!);
        lines.push(sameA[i]!);
      }
      lines.push(...a.slice(30, 35).map(reordered)); // same records, other bytes: unchanged
      const fresh0v2 = changed(fresh[0]!, 'second version in the same file');
      const a0v3 = changed(changedA[0]!, 'v3');
      const a35v2 = changed(a[35]!, 'v2');
      const a36v2 = changed(a[36]!, 'v2');
      lines.push(
        fresh0v2, // a new key again: updated
        a0v3, // a changed key changed again: updated
        a35v2, // changed (updated) ...
        a[35]!, // ... and back to the stored bytes: updated again, the stored version is written
        a[36]!, // the stored bytes: unchanged
        a36v2, // changed: updated
        a36v2, // the same bytes again: unchanged, and the row is the later line's
      );
      expect(lines).toHaveLength(57);
      const lastLineOf = (r: FakeRecord) => lines.lastIndexOf(r) + 1;

      const s = await importFile(tw.w, config, log, { file: file(toJsonl(lines)), loadId: 'mix-b' });
      expect(s).toMatchObject({ rowsRead: 57, inserted: 15, updated: 15, unchanged: 27, rejected: 0 });
      // Keys the warehouse held were merged through the stage.
      expect(await someSessionHasStage(tw)).toBe(true);
      const perDay = Object.fromEntries(
        s.days.map((d) => [d.day, [d.rowsRead, d.inserted, d.updated, d.unchanged]]),
      );
      expect(perDay).toEqual({ '2026-08-03': [41, 0, 14, 27], '2026-08-04': [16, 15, 1, 0] });

      // The final version of every key, loaded clean elsewhere.
      const finalA = a.map((r, i) => (i === 0 ? a0v3 : i < 10 ? changedA[i]! : i === 36 ? a36v2 : r));
      const finalFresh = [fresh0v2, ...fresh.slice(1)];
      await importFile(clean.w, config, log, { file: file(toJsonl([...finalA, ...finalFresh])) });
      const expected = await contentOf(clean);
      expect(expected).toHaveLength(55);
      expect(await contentOf(tw)).toEqual(expected);

      const after = await metaOf(tw);
      expect(after.size).toBe(55);
      const written = new Map<string, number>([
        [a0v3['Message ID'], lastLineOf(a0v3)],
        ...changedA.slice(1).map((r) => [r['Message ID'], lastLineOf(r)] as [string, number]),
        [a[35]!['Message ID'], lastLineOf(a[35]!)],
        [a36v2['Message ID'], lastLineOf(a36v2)],
        [fresh0v2['Message ID'], lastLineOf(fresh0v2)],
        ...fresh.slice(1).map((r) => [r['Message ID'], lastLineOf(r)] as [string, number]),
      ]);
      expect(written.size).toBe(12 + 15);
      expect(lastLineOf(a36v2)).toBe(57);
      for (const [id, m] of after) {
        const old = before.get(id);
        const line = written.get(id);
        if (id === a36v2['Message ID']) {
          // Lines 56 and 57 are the same bytes. In one batch the later line is the key's final
          // version and is written; in a later batch it finds the row as it is and writes nothing.
          expect(m.load, id).toBe('mix-b');
          expect([56, 57], id).toContain(m.line);
        } else if (line !== undefined) {
          expect(m, id).toMatchObject({ load: 'mix-b', line });
        } else {
          // Untouched: the first load's row as it was.
          expect(m, id).toEqual(old);
        }
        if (old && line !== undefined) {
          // Updated through the stage: first-loaded time kept, loaded time moved.
          expect(m.first, id).toBe(old.first);
          expect(m.loaded > old.loaded, id).toBe(true);
        }
        // A new key is inserted with both times equal; one written again by a later batch of the
        // same load (only the key that is twice in the file can be) keeps its first-loaded time.
        if (!old && id !== fresh0v2['Message ID']) expect(m.first, id).toBe(m.loaded);
        if (!old) expect(m.first <= m.loaded, id).toBe(true);
      }
    },
  );

  it.each([
    { conns: '1', shape: 'one partition' },
    { conns: '3', shape: '3 partitions' },
  ])(
    'when a load starts with new keys only and then meets stored ones ($shape), then the counts and rows are those of looking every batch up',
    async ({ conns }) => {
      // Batches of 10: after a batch whose lookup found nothing, a partition copies its next
      // batch without the lookup; the stored keys further on make such a COPY fail on the primary
      // key, and that batch is merged again with the lookup.
      const config = parseConfig({ CRS_BATCH_SIZE: '10', CRS_LOAD_PARTITIONS: conns });
      const tw = await warehouse();
      const clean = await warehouse();
      const stored = makeRecords(30, { seed: `skip-a-${conns}`, day: '2026-08-06' });
      await importFile(tw.w, config, log, { file: file(toJsonl(stored)), loadId: 'skip-a' });
      const fresh = makeRecords(45, { seed: `skip-n-${conns}`, day: '2026-08-07' });
      const changedA = stored.slice(0, 10).map((r, i) => changed(r, `v2 ${i}`));
      const lines = [...fresh.slice(0, 35), ...changedA, ...stored.slice(10, 20), ...fresh.slice(35)];
      const s = await importFile(tw.w, config, log, { file: file(toJsonl(lines)), loadId: 'skip-b' });
      expect(s).toMatchObject({ rowsRead: 65, inserted: 45, updated: 10, unchanged: 10, rejected: 0 });
      const perDay = Object.fromEntries(
        s.days.map((d) => [d.day, [d.rowsRead, d.inserted, d.updated, d.unchanged]]),
      );
      expect(perDay).toEqual({ '2026-08-06': [20, 0, 10, 10], '2026-08-07': [45, 45, 0, 0] });
      await importFile(clean.w, config, log, {
        file: file(toJsonl([...changedA, ...stored.slice(10), ...fresh])),
      });
      expect(await contentOf(tw)).toEqual(await contentOf(clean));
      // Again: every key stored, every line unchanged.
      const again = await importFile(tw.w, config, log, { file: file(toJsonl(lines)), loadId: 'skip-c' });
      expect(again).toMatchObject({ rowsRead: 65, inserted: 0, updated: 0, unchanged: 65 });
    },
  );

  it('when only some lines of a loaded file change, then only those rows are rewritten, keeping their first-loaded time', async () => {
    const config = parseConfig({ CRS_BATCH_SIZE: '50', CRS_LOAD_PARTITIONS: '2' });
    const tw = await warehouse();
    const recs = makeRecords(200, { seed: 'partial', day: '2026-08-05' });
    await importFile(tw.w, config, log, { file: file(toJsonl(recs)), loadId: 'partial-1' });
    const before = await metaOf(tw);
    const contentBefore = await contentOf(tw);

    const edits = new Set([3, 77, 150, 199]);
    const next = recs.map((r, i) => (edits.has(i) ? { ...r, Input: `${r.Input} (edited)` } : r));
    const s = await importFile(tw.w, config, log, { file: file(toJsonl(next)), loadId: 'partial-2' });
    expect(s).toMatchObject({ rowsRead: 200, inserted: 0, updated: 4, unchanged: 196 });
    expect(await someSessionHasStage(tw)).toBe(true);

    const after = await metaOf(tw);
    const contentAfter = await contentOf(tw);
    const editedIds = new Set([...edits].map((i) => recs[i]!['Message ID']));
    for (const [id, m] of after) {
      const old = before.get(id)!;
      if (editedIds.has(id)) {
        expect(m.load, id).toBe('partial-2');
        expect(m.first, id).toBe(old.first);
        expect(m.loaded > old.loaded, id).toBe(true);
      } else {
        expect(m, id).toEqual(old);
      }
    }
    const changedRows = contentAfter.filter(
      (row, i) => JSON.stringify(row) !== JSON.stringify(contentBefore[i]),
    );
    expect(new Set(changedRows.map((r) => r.message_id))).toEqual(editedIds);
    for (const r of changedRows) expect(r.input).toMatch(/ \(edited\)$/);
  });

  it('when a resumed load finds lines before its checkpoint changed, then the warehouse equals a clean load of the new source', async () => {
    const tw = await warehouse();
    const clean = await warehouse();
    const recs = makeRecords(3000, { seed: 'resume-enc', day: '2026-08-06' });
    const load = (text: string, breakAfterBytes?: number) =>
      runLoad({
        warehouse: tw.w,
        log,
        target: fileLoad('resume-enc', 'test'),
        open: async () =>
          (async function* () {
            const bytes = Buffer.from(text);
            if (breakAfterBytes === undefined) {
              yield bytes;
              return;
            }
            yield bytes.subarray(0, breakAfterBytes);
            // Break for good once every partition has committed some batches.
            for (let waited = 0; ; waited++) {
              const cp = await tw.w.pool.query(
                "select min(lines_committed)::int as n from load_checkpoints where load_key = 'resume-enc'",
              );
              if (cp.rows[0].n > 300) break;
              if (waited > 2000) throw new Error('no batch committed');
              await sleep(25);
            }
            throw new CrsError('INPUT_UNREADABLE', 'disk gone');
          })(),
        batchSize: 50,
        parts: 3,
        maxLineBytes: 1 << 20,
        maxReopens: 0,
      });
    const text = toJsonl(recs);
    await expect(load(text, Math.floor(text.length / 2))).rejects.toMatchObject({ code: 'INPUT_UNREADABLE' });
    const cp = await tw.w.pool.query(
      "select min(lines_committed)::int as n from load_checkpoints where load_key = 'resume-enc'",
    );
    expect(cp.rows[0].n).toBeGreaterThan(300);

    // Since then: a late record at the top (every line moves down), two records before the
    // checkpoint corrected, and one after it.
    const late = makeRecords(1, { seed: 'resume-enc-late', day: '2026-08-06' })[0]!;
    const next = recs.map((r, i) =>
      i === 5 || i === 120 || i === 2900 ? { ...r, Response: `corrected ${i} ✓` } : r,
    );
    const s = await load(toJsonl([late, ...next]));
    expect(s.resumed).toBe(true);

    await importFile(clean.w, parseConfig({ CRS_BATCH_SIZE: '500' }), log, {
      file: file(toJsonl([late, ...next])),
    });
    const expected = await contentOf(clean);
    expect(expected).toHaveLength(3001);
    expect(await contentOf(tw)).toEqual(expected);
    const corrected = await tw.w.pool.query(
      `select _load_id, response from analytics_messages where message_id = any($1::uuid[]) order by response`,
      [[recs[5]!['Message ID'], recs[120]!['Message ID'], recs[2900]!['Message ID']]],
    );
    expect(corrected.rows).toEqual([
      { _load_id: 'resume-enc', response: 'corrected 120 ✓' },
      { _load_id: 'resume-enc', response: 'corrected 2900 ✓' },
      { _load_id: 'resume-enc', response: 'corrected 5 ✓' },
    ]);
  });

  it('when every line of a file carries a new field and the lines take the fast path (parsed in the merge), then the drift counts each line once', async () => {
    const tw = await warehouse();
    const recs = makeRecords(40, { seed: 'fast-drift', day: '2026-08-09' }).map((r, i) => ({
      ...r,
      Region: `eu-${i}`,
    }));
    // Batches of 4 lines on one connection: ten batches, each merged while the next one fills.
    const s = await importFile(tw.w, parseConfig({ CRS_BATCH_SIZE: '4', CRS_LOAD_PARTITIONS: '1' }), log, {
      file: file(toJsonl(recs)),
    });
    expect(s).toMatchObject({ inserted: 40, rejected: 0 });
    const counts = await tw.w.pool.query(
      `select path, sum(count)::int as n from schema_drift_counts where source = 'export' group by path`,
    );
    expect(counts.rows).toEqual([{ path: 'Region', n: 40 }]);
  });
});
