import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dayLoad } from '../../src/common/load-target.ts';
import { type LoadSummary, runLoad } from '../../src/ingest/merge/load.ts';
import { createLogger } from '../../src/log.ts';
import { markDayRunning } from '../../src/warehouse/ledger.ts';
import { type FakeRecord, makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * A line that names its record twice, the second time under an escaped key:
 * `{"Message ID":"A", …, "Message\u0020ID":"B"}` is record B to JSON.parse (`\u0020` is a space,
 * and the last of duplicated keys wins). The loader's byte readers must read B too, as an
 * operator's loads meet it: a quarantined such line keeps B's row in its complete day, and an
 * intraday pull with the known-lines skip stores what a pull without it stores.
 */
const DAY = '2026-11-10';
const log = createLogger({ level: 'silent', pretty: false });

/** `rec`'s fields under A's id first, then its own id under the escaped spelling of the key. */
function underEscapedKey(a: string, rec: FakeRecord): string {
  const { 'Message ID': id, ...rest } = rec;
  return `{"Message ID":"${a}",${JSON.stringify(rest).slice(1, -1)},"Message\\u0020ID":"${id}"}`;
}

function source(lines: string[]) {
  return async () =>
    (async function* () {
      yield Buffer.from(toJsonl(lines));
    })();
}

async function load(
  tw: TestWarehouse,
  loadId: string,
  lines: string[],
  o: { open: boolean; knownLines: boolean },
): Promise<LoadSummary> {
  await markDayRunning(tw.w.db, DAY, loadId);
  return runLoad({
    warehouse: tw.w,
    log,
    target: dayLoad(loadId, DAY, o.open),
    open: source(lines),
    knownLinesMax: o.knownLines ? 1000 : 0,
    // No guard: every delete the loader decides is made, so a wrong one shows.
    deleteGuardPct: 100,
    deleteGuardLoadPct: 100,
    batchSize: 2,
    parts: 3,
    maxLineBytes: 1 << 20,
    maxReopens: 0,
  });
}

async function row(tw: TestWarehouse, id: string) {
  const r = await tw.w.pool.query<{ response: string; deleted: boolean }>(
    'select response, _deleted_at is not null as deleted from analytics_messages where message_id = $1',
    [id],
  );
  return r.rows[0];
}

describe('a line whose id key is written twice, the last time escaped (Postgres)', () => {
  const [a, b, c] = makeRecords(3, { day: DAY, seed: 'escaped-id-key' }) as [
    FakeRecord,
    FakeRecord,
    FakeRecord,
  ];
  const A = a['Message ID'];
  const B = b['Message ID'];
  const warehouses: TestWarehouse[] = [];
  const warehouse = async () => {
    const tw = await createTestWarehouse({ prefix: 'escaped_id' });
    warehouses.push(tw);
    return tw;
  };
  beforeAll(() => {
    // The line is B to the parser, whatever a byte reader takes from its first key.
    expect(JSON.parse(underEscapedKey(A, b))['Message ID']).toBe(B);
  });
  afterAll(async () => {
    for (const tw of warehouses) await tw.dispose();
  });

  it('when the complete export of a day holds record B only in such a line, quarantined for its time, then the reject names B and B keeps its row', async () => {
    const tw = await warehouse();
    await load(tw, 'first', toJsonl([a, b, c]).trim().split('\n'), { open: false, knownLines: false });
    // B's line again, its time without an offset (time_without_offset): quarantined, so present.
    const bad = underEscapedKey(A, { ...b, 'Message Time': `${DAY}T10:00:00` });
    const s = await load(tw, 'second', [JSON.stringify(a), bad, JSON.stringify(c)], {
      open: false,
      knownLines: false,
    });
    expect(s.rejected).toBe(1);
    // The README's promise: a line in the quarantine counts as present; its row is not deleted.
    expect(await row(tw, B)).toMatchObject({ deleted: false });
    expect(s.deleted).toBe(0);
    const rejects = await tw.w.pool.query('select message_id::text as id, error_code from rejected_records');
    expect(rejects.rows).toEqual([{ id: B, error_code: 'time_without_offset' }]);
  });

  it('when an intraday pull reads a new version of B in such a line and then B’s stored line again, then B ends as the stored line, with the known-lines skip as without it', async () => {
    const ends: Record<string, string | undefined> = {};
    for (const knownLines of [false, true]) {
      const tw = await warehouse();
      await load(tw, 'pull-1', toJsonl([a, b, c]).trim().split('\n'), { open: true, knownLines });
      const v2 = underEscapedKey(A, { ...b, Response: 'B, second version' });
      // JSON.parse reads B twice: v2, then the stored line (the last wins): B is unchanged.
      await load(tw, 'pull-2', [v2, JSON.stringify(b), JSON.stringify(a)], { open: true, knownLines });
      ends[knownLines ? 'skip' : 'no skip'] = (await row(tw, B))?.response;
    }
    expect(ends).toEqual({ 'no skip': b.Response, skip: b.Response });
  });
});
