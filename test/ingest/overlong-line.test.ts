import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { closedDayLoad } from '../../src/common/load-target.ts';
import { parseConfig } from '../../src/config.ts';
import { loadExportDay } from '../../src/ingest/source/export-day.ts';
import { createLogger } from '../../src/log.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { cliSync } from '../helpers/cli.ts';
import { PINNED, runningClock } from '../helpers/clock.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { tempFiles } from '../helpers/load-files.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * A line over CRS_MAX_LINE_BYTES keeps only its first 64 KiB in the quarantine, and the export
 * writes `Message ID` and `Message Time` after `Input` and `Response`: a long enough line has both
 * beyond what is kept. Such a line is in the export all the same, so a day declared complete must
 * not delete its message's row, and the day's ledger counts it as rejected.
 */

const log = createLogger({ level: 'silent', pretty: false });
const SEED = 23;
// The smallest limit the configuration takes above the 64 KiB prefix.
const MAX_LINE = String(64 * 1024);

/** `line` with its Input grown so that everything after it lies beyond the first 64 KiB. */
function overLong(line: string): string {
  expect(line.startsWith('{"Input":"')).toBe(true);
  return line.replace('{"Input":"', `{"Input":"${'long input '.repeat(7000)}`);
}

function cli(args: string[], env: Record<string, string>) {
  return cliSync(args, { env });
}

describe('an over-long line with its Message ID beyond the kept prefix', () => {
  let tw: TestWarehouse;
  beforeAll(async () => {
    tw = await createTestWarehouse();
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  const row = async (id: string) =>
    (
      await tw.w.pool.query<{ deleted: boolean }>(
        'select _deleted_at is not null as deleted from analytics_messages where message_id = $1',
        [id],
      )
    ).rows[0];
  const rejectOf = async (loadId: string) =>
    (
      await tw.w.pool.query<{
        message_id: string | null;
        day: string | null;
        error_code: string;
        raw: string;
      }>('select message_id::text, day::text, error_code, raw from rejected_records where _load_id = $1', [
        loadId,
      ])
    ).rows;
  const ledger = async (day: string) =>
    (
      await tw.w.pool.query<{ rows_rejected: number; rows_deleted: number; deletes_held: number }>(
        'select rows_rejected::int, rows_deleted::int, deletes_held::int from sync_days where day = $1',
        [day],
      )
    ).rows[0];

  describe("in a day's export over HTTP", () => {
    let sim: Simulator;
    let server: Server;
    let url: string;
    let body = '';
    beforeAll(async () => {
      sim = await startSimulator({ seed: SEED, days: 4, recordsPerDay: 120, now: runningClock(PINNED) });
      // The day's export as the service would send it, known complete (type, length, last newline).
      server = createServer((req, res) => {
        if (!req.url?.startsWith('/v2/analytics/messages')) {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/x-ndjson' }).end(body);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      await sim?.close();
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    });

    const load = (from: 'simulator' | 'server', loadId: string, day: string) => {
      const config = parseConfig({
        ...sim.env(),
        ...(from === 'server' ? { CRS_BASE_URL: url } : {}),
        CRS_BATCH_SIZE: '50',
        CRS_RATE_LIMIT_RPS: '1000',
        CRS_MAX_LINE_BYTES: MAX_LINE,
      });
      const client = createServiceClient(
        { ...config.api, concurrency: 2, baseBackoffMs: 5, maxBackoffMs: 50 },
        log,
      );
      return loadExportDay({ warehouse: tw.w, client, config, log }, { target: closedDayLoad(loadId, day) });
    };

    it('when a day loaded in full is exported again, complete, with one line over the limit, then that row stays live, the reject has its id and day, and the ledger counts 1 rejected', async () => {
      const day = sim.truth.days().at(-3)!;
      const lines = [...sim.truth.exportDayLines(day)];
      await load('simulator', 'full', day);
      const victim = lines[7]!;
      const id = (JSON.parse(victim) as Record<string, string>)['Message ID']!.toLowerCase();
      expect(await row(id)).toEqual({ deleted: false });

      body = `${lines.map((l) => (l === victim ? overLong(l) : l)).join('\n')}\n`;
      const s = await load('server', 'long', day);

      expect(s.incompleteReason).toBeNull();
      expect(s.rejected).toBe(1);
      expect(await row(id)).toEqual({ deleted: false });
      const [rej, ...more] = await rejectOf('long');
      expect(more).toEqual([]);
      expect(rej).toMatchObject({ error_code: 'line_too_long', message_id: id, day });
      expect(rej!.raw).not.toContain('Message ID');
      expect(await ledger(day)).toEqual({ rows_rejected: 1, rows_deleted: 0, deletes_held: 0 });
    });
  });

  describe('in a file imported with the CLI as the complete export of its day', () => {
    const day = '2026-11-18';
    const file = tempFiles('crs-overlong-');
    const env = () => ({ DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema, CRS_MAX_LINE_BYTES: MAX_LINE });

    it('when the same day is imported again with one line over the limit, then that row stays live, the reject has its id and day, the ledger counts 1 rejected and `rejects list` shows the id', async () => {
      const lines = makeRecords(30, { day, seed: 'overlong-file' }).map((r) => JSON.stringify(r));
      const full = cli(['import', file(toJsonl(lines)), '--from', day, '--to', day, '--no-progress'], env());
      expect(full.code, full.stderr).toBe(0);
      const id = (JSON.parse(lines[4]!) as Record<string, string>)['Message ID']!;

      const again = lines.map((l, i) => (i === 4 ? overLong(l) : l));
      const r = cli(
        [
          'import',
          file(toJsonl(again)),
          '--from',
          day,
          '--to',
          day,
          '--load-id',
          'file-long',
          '--no-progress',
        ],
        env(),
      );
      // A quarantined line does not fail the import.
      expect(r.code, r.stderr).toBe(0);

      expect(await row(id)).toEqual({ deleted: false });
      expect(await rejectOf('file-long')).toEqual([
        expect.objectContaining({ error_code: 'line_too_long', message_id: id, day }),
      ]);
      expect(await ledger(day)).toEqual({ rows_rejected: 1, rows_deleted: 0, deletes_held: 0 });
      const list = cli(['rejects', 'list', '--load-id', 'file-long'], env());
      expect(list.code, list.stderr).toBe(0);
      expect(list.stdout).toContain('message id');
      expect(list.stdout).toContain(id);
    });
  });
});
