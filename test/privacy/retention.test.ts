import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.ts';
import { importFile } from '../../src/ingest/source/import-file.ts';
import { createLogger } from '../../src/log.ts';
import { applyRetention } from '../../src/warehouse/privacy/retention.ts';
import { refreshRollups } from '../../src/warehouse/rollups/refresh.ts';
import { makeRecords, toJsonl, uuidFrom } from '../helpers/export-lines.ts';
import { tempFiles } from '../helpers/load-files.ts';
import { rollupRows } from '../helpers/rollups.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

// Text retention as a privacy office checks it: past the retention no text is left in the export
// rows, history, citations or artifacts; the rows, every figure, the rollups and the views are
// exactly as before; a re-load of the same lines brings no text back.

const log = createLogger({ level: 'silent', pretty: false });
const file = tempFiles('crs-retention-');
const config = parseConfig({ CRS_BATCH_SIZE: '11', CRS_LOAD_PARTITIONS: '2' });
// makeRecords spreads its records over 2026-11-01 … 03; "today" is the 5th, 3 days kept: the 1st goes.
const TODAY = '2026-11-05';
const records = makeRecords(60, { seed: 'retention', threads: 5 });
let tw: TestWarehouse;
let path: string;

const q = async <T>(sql: string): Promise<T[]> => (await tw.w.pool.query(sql)).rows as T[];
const VIEWS = ['daily_usage', 'user_activity', 'thread_summary', 'citation_sources'];
async function figures(): Promise<unknown> {
  const out: Record<string, unknown> = { rollups: await rollupRows(tw) };
  for (const v of VIEWS) out[v] = (await q(`select * from ${v}`)).map((r) => JSON.stringify(r)).sort();
  out.rows = await q(
    `select message_id, message_date::text, response_chars, record_hash, line_hash from analytics_messages order by 1`,
  );
  return out;
}

beforeAll(async () => {
  tw = await createTestWarehouse();
  path = file(toJsonl(records));
  await importFile(tw.w, config, log, { file: path });
  // One history entry, citation and artifact per export row, written when the row was.
  for (const [i, r] of records.entries()) {
    const m = uuidFrom(`retention:h:${i}`);
    await tw.w.pool.query(
      `insert into thread_messages (message_id, thread_id, position, role, text, created_at, raw)
       values ($1, $2, $3, 'assistant', 'words', $4, '{"content": "words"}')`,
      [m, r['Thread ID'], i, r['Message Time']],
    );
    await tw.w.pool.query(
      `insert into citations (owner_kind, owner_id, ordinal, message_id, thread_id, summary, extra)
       values ('message', $1, 0, $2, $3, 'a summary', '{}')`,
      [m, m, r['Thread ID']],
    );
    await tw.w.pool.query(
      `insert into artifacts (artifact_id, thread_id, message_id, val, val_json, raw, fetched_via)
       values ($1, $2, $3, 'a chart', '{"v": 1}', '{"value": "a chart"}', 'v2')`,
      [`art-${i}`, r['Thread ID'], m],
    );
  }
  await refreshRollups(tw.w.pool);
});
afterAll(async () => {
  await tw?.dispose();
});

describe('text retention', () => {
  const old = records.filter((r) => r['Message Time'].startsWith('2026-11-01')).length;

  it('when a dry run is asked, then it counts the rows past retention and clears nothing', async () => {
    const before = await figures();
    const r = await applyRetention(tw.w.pool, 3, { dryRun: true, today: TODAY });
    expect(r).toEqual({
      dryRun: true,
      before: '2026-11-02',
      rows: { analytics_messages: old, thread_messages: old, artifacts: old, citations: old },
    });
    expect(await figures()).toEqual(before);
    expect(
      (await q<{ n: number }>(`select count(*)::int n from analytics_messages where input = ''`))[0]!.n,
    ).toBe(0);
  });

  it('when retention is applied, then no old text is left, newer text is kept and every figure is unchanged', async () => {
    const before = await figures();
    const r = await applyRetention(tw.w.pool, 3, { today: TODAY });
    expect(r.rows).toEqual({ analytics_messages: old, thread_messages: old, artifacts: old, citations: old });
    expect(await figures()).toEqual(before);
    const left = await q<{ day: string; texts: number; rows: number }>(
      `select message_date::text as day, count(*) filter (where input <> '' or response <> '')::int as texts,
              count(*)::int as rows from analytics_messages group by 1 order by 1`,
    );
    expect(left).toEqual([
      { day: '2026-11-01', texts: 0, rows: old },
      expect.objectContaining({ day: '2026-11-02', texts: left[1]!.rows }),
      expect.objectContaining({ day: '2026-11-03', texts: left[2]!.rows }),
    ]);
    const oldEntries = await q<{ n: number }>(
      `select count(*)::int n from thread_messages m
         left join citations c on c.message_id = m.message_id left join artifacts a on a.message_id = m.message_id
        where m.created_at < '2026-11-02' and (m.text is not null or m.raw <> '{}' or c.summary is not null
              or a.val is not null or a.val_json is not null or a.raw <> '{}')`,
    );
    expect(oldEntries[0]!.n).toBe(0);
    const kept = await q<{ n: number }>(`select count(*)::int n from citations where summary is not null`);
    expect(kept[0]!.n).toBe(records.length - old);
  });

  it('when it is applied again, or the same lines are loaded again, then nothing changes and no text comes back', async () => {
    const before = await figures();
    const again = await applyRetention(tw.w.pool, 3, { today: TODAY });
    expect(Object.values(again.rows)).toEqual([0, 0, 0, 0]);
    const s = await importFile(tw.w, config, log, { file: path, loadId: 'reload' });
    expect(s).toMatchObject({ rowsRead: records.length, unchanged: records.length, inserted: 0, updated: 0 });
    const texts = await q<{ n: number }>(
      `select count(*)::int n from analytics_messages where message_date < '2026-11-02' and (input <> '' or response <> '')`,
    );
    expect(texts[0]!.n).toBe(0);
    expect(await figures()).toEqual(before);
  });

  it('when a changed record of a day past retention is loaded, then it is written without its text, counted updated once', async () => {
    const changed = records.map((r) =>
      r['Message Time'].startsWith('2026-11-01') ? { ...r, Response: `${r.Response} (edited)` } : r,
    );
    const kept = parseConfig({
      CRS_BATCH_SIZE: '11',
      CRS_LOAD_PARTITIONS: '2',
      CRS_TEXT_RETENTION_DAYS: '3',
    });
    // Retention counts from today: days before 2026-11-02 are past it whatever the date is now.
    expect(kept.textRetentionDays).toBe(3);
    const s = await importFile(tw.w, kept, log, { file: file(toJsonl(changed)), loadId: 'edited' });
    expect(s).toMatchObject({ updated: old, unchanged: records.length - old });
    const texts = await q<{ n: number }>(
      `select count(*)::int n from analytics_messages where message_date < '2026-11-02' and (input <> '' or response <> '')`,
    );
    expect(texts[0]!.n).toBe(0);
    const again = await importFile(tw.w, kept, log, { file: file(toJsonl(changed)), loadId: 'edited-again' });
    expect(again).toMatchObject({ updated: 0, unchanged: records.length });
  });
});
