import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closedDayLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { isCrsError } from '../../src/errors.ts';
import { parseRecord } from '../../src/ingest/parse/record-parser.ts';
import { loadExportDay } from '../../src/ingest/source/export-day.ts';
import { createLogger } from '../../src/log.ts';
import { generateExportLines } from '../../src/simulator/index.ts';
import { client, SECRETS } from '../api/helpers/client-setup.ts';
import { type ScriptedServer, startScriptedServer } from '../api/helpers/scripted-server.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * A day's export cut mid-stream and requested again: the second answer is the same export, or a
 * newer version of it (late records that arrived in between sit early in the day and shift every
 * later line). Either way the day must end equal to the last version, row by row.
 */

const log = createLogger({ level: 'silent', pretty: false });
const DAY = '2026-11-20';
const SEED = 4242;

let tw: TestWarehouse;
let server: ScriptedServer | undefined;
let full: string[];

beforeAll(async () => {
  tw = await createTestWarehouse();
  console.log(`stream-reopen: simulator seed ${SEED}, day ${DAY}`);
  full = [...generateExportLines({ seed: SEED, day: DAY, recordsPerDay: 1500 })];
});
afterAll(async () => {
  await tw?.dispose();
});
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** Answers the export: the first request with `first`, cut mid-line at `cutAt` of its bytes; later ones whole. */
async function serve(first: string[], later: string[], cutAt: number): Promise<ScriptedServer> {
  const a = Buffer.from(`${first.join('\n')}\n`);
  const b = Buffer.from(`${later.join('\n')}\n`);
  return startScriptedServer((_req, res, n) => {
    const body = n === 1 ? a : b;
    res.writeHead(200, { 'content-type': 'application/x-ndjson', 'content-length': String(body.length) });
    if (n > 1) {
      res.end(body);
      return;
    }
    // Cut inside a line: the client sees a short body (Content-Length) and the loader reopens.
    let at = Math.floor(body.length * cutAt);
    while (body[at - 1] === 0x0a) at++;
    res.write(body.subarray(0, at), () => setTimeout(() => res.destroy(), 20));
  });
}

function deps(url: string) {
  const config = parseConfig({
    CRS_BASE_URL: url,
    CRS_SERVICE_ACCOUNT_TOKEN: SECRETS.serviceAccountToken,
    CRS_BATCH_SIZE: '100',
    CRS_LOAD_PARTITIONS: '3',
  });
  return { warehouse: tw.w, client: client(url).api, config, log };
}

async function liveRows(): Promise<Map<string, string>> {
  const r = await tw.w.pool.query<{ id: string; h: string }>(
    `select message_id::text as id, record_hash as h from analytics_messages
     where message_date = $1 and _deleted_at is null`,
    [DAY],
  );
  return new Map(r.rows.map((x) => [x.id, x.h]));
}

function truthRows(lines: string[]): Map<string, string> {
  const m = new Map<string, string>();
  for (const l of lines) {
    const p = parseRecord(l);
    if (p.ok) m.set(p.record.messageId, p.record.recordHash);
  }
  return m;
}

describe('a cut export stream reopened', () => {
  it('when the reopened stream repeats the first one, then the load goes on after the cut and the day equals the export', async () => {
    await tw.w.pool.query('delete from analytics_messages');
    server = await serve(full, full, 0.6);
    const s = await loadExportDay(deps(server.url), { target: closedDayLoad('same-1', DAY) });
    expect(s.reopens).toBe(1);
    expect(server.seen.length).toBe(2);
    expect(s.rowsRead).toBe(full.length);
    expect(s.inserted).toBe(truthRows(full).size);
    expect(await liveRows()).toEqual(truthRows(full));
  });

  it('when late records shift the reopened stream, then the attempt fails as SOURCE_CHANGED and the retry leaves the day equal to the new export row by row', async () => {
    await tw.w.pool.query('delete from analytics_messages');
    // The first answer lacks records that arrive meanwhile, some early in the day.
    const late = new Set([2, 7, 40, 41, 300, 1200]);
    const older = full.filter((_, i) => !late.has(i));
    server = await serve(older, full, 0.6);
    const d = deps(server.url);
    const err = await loadExportDay(d, { target: closedDayLoad('late-1', DAY) }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isCrsError(err) && err.code).toBe('SOURCE_CHANGED');
    expect(isCrsError(err) && err.retryable).toBe(true);
    // Batches committed before the cut stay committed: the retry resumes from them.
    const cp = await tw.w.pool.query<{ n: string }>(
      'select min(lines_committed) as n from load_checkpoints where load_key = $1',
      [`late-1:${DAY}`],
    );
    expect(Number(cp.rows[0]!.n)).toBeGreaterThan(0);

    // The activity's retry: the same load id, so the same checkpoint.
    const s = await loadExportDay(d, { target: closedDayLoad('late-1', DAY) });
    expect(s.resumedFromLine).toBeGreaterThan(0);
    expect(await liveRows()).toEqual(truthRows(full));
    // Every record inserted once. (rows_read counts the lines read from either version: the
    // records the late ones pushed past the checkpoint are read twice.)
    expect(s.inserted).toBe(truthRows(full).size);
    expect(s.rowsRead).toBeGreaterThanOrEqual(full.length);
    const day = await tw.w.db
      .selectFrom('sync_days')
      .selectAll()
      .where('day', '=', DAY)
      .executeTakeFirstOrThrow();
    expect(day.status).toBe('complete');
    expect(day.rows_inserted).toBe(truthRows(full).size);
    expect(day.rows_deleted).toBe(0);
  });

  it('when records leave the export between the two requests, then the retry leaves the day equal to the new export, the gone rows marked deleted', async () => {
    await tw.w.pool.query('delete from analytics_messages');
    // Threads deleted meanwhile: their records, some before the cut, are gone from the second answer.
    const leaving = new Set([1, 5, 90, 700, 1400]);
    const newer = full.filter((_, i) => !leaving.has(i));
    server = await serve(full, newer, 0.5);
    const d = deps(server.url);
    const err = await loadExportDay(d, { target: closedDayLoad('gone-1', DAY) }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isCrsError(err) && err.code).toBe('SOURCE_CHANGED');
    const s = await loadExportDay(d, { target: closedDayLoad('gone-1', DAY) });
    expect(await liveRows()).toEqual(truthRows(newer));
    // Only the records the first answer had and the committed batches stored can be deleted.
    const deleted = await tw.w.pool.query<{ n: string }>(
      'select count(*) as n from analytics_messages where message_date = $1 and _deleted_at is not null',
      [DAY],
    );
    expect(s.deleted).toBe(Number(deleted.rows[0]!.n));
    expect(s.deleted).toBeGreaterThan(0);
  });
});
