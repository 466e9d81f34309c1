import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDayLoad } from '../../src/common/load-target.ts';
import { runLoad } from '../../src/ingest/merge/load.ts';
import { exportContract } from '../../src/ingest/parse/record-parser.ts';
import { createLogger } from '../../src/log.ts';
import { markDayRunning } from '../../src/warehouse/ledger.ts';
import { cliSync } from '../helpers/cli.ts';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

const log = createLogger({ level: 'silent', pretty: false });

function cli(args: string[], env: Record<string, string>, input?: string) {
  return cliSync(args, { env, ...(input === undefined ? {} : { input }) });
}

/** A table row of the import summary, as `label  value`. */
const row = (label: string, value: number | string) => new RegExp(`^\\s*${label}\\s+${value}\\s*$`, 'm');

// `crs-sync import -`: the export piped in, as `curl … | crs-sync import -` does.
describe('import - (standard input)', () => {
  const DAY = '2026-10-05';
  const records = makeRecords(12, { day: DAY, seed: 'stdin' });
  const bad = '{"Message ID": "not json';
  let tw: TestWarehouse;
  let env: Record<string, string>;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'stdin' });
    env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema };
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  const live = async () =>
    (
      await tw.w.pool.query<{ message_id: string; response: string }>(
        'select message_id::text as message_id, response from analytics_messages where _deleted_at is null order by 1',
      )
    ).rows;

  it('when an export is piped in, then its records load as a file would, its bad line is quarantined as read from stdin, and the summary says so', async () => {
    const r = cli(['import', '-', '--no-progress', '--load-id', 'piped-1'], env, toJsonl([...records, bad]));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(row('load id', 'piped-1'));
    expect(r.stdout).toMatch(row('lines read', 13));
    expect(r.stdout).toMatch(row('records read', 13));
    expect(r.stdout).toMatch(row('inserted', 12));
    expect(r.stdout).toMatch(row('rejected', 1));
    expect(r.stdout).toContain('Rejected lines are in rejected_records: crs-sync rejects list');
    expect(await live()).toEqual(
      records
        .map((x) => ({ message_id: x['Message ID'], response: x.Response }))
        .sort((a, b) => a.message_id.localeCompare(b.message_id)),
    );
    const rejects = await tw.w.pool.query(
      'select source, source_name, _load_id, line_no::int, raw, error_code from rejected_records',
    );
    expect(rejects.rows).toEqual([
      {
        source: 'file',
        source_name: 'stdin',
        _load_id: 'piped-1',
        line_no: 13,
        raw: bad,
        error_code: 'invalid_json',
      },
    ]);
    const run = await tw.w.pool.query('select kind, source, status from sync_runs where load_id = $1', [
      'piped-1',
    ]);
    expect(run.rows).toEqual([{ kind: 'import', source: 'stdin', status: 'succeeded' }]);
  });

  it('when the same export is piped in again without a load id, then it gets a fresh one and changes no row', async () => {
    const before = await live();
    const r = cli(['import', '-', '--json'], env, toJsonl([...records, bad]));
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s).toMatchObject({
      rowsRead: 13,
      inserted: 0,
      updated: 0,
      unchanged: 12,
      rejected: 1,
      deleted: 0,
    });
    expect(s.loadId).toMatch(/^import-\d{14}-[0-9a-f]{6}$/);
    expect(await live()).toEqual(before);
  });

  it('when a piped export is declared the complete export of its day and lacks a record, then that row is marked deleted; cut without its final newline, nothing is', async () => {
    // One record of twelve is more than the delete guard's 10 %: let this day's delete through.
    const guard = { ...env, CRS_DELETE_GUARD: '50', CRS_DELETE_GUARD_LOAD: '50' };
    const fewer = records.slice(1);
    const cut = toJsonl(fewer).slice(0, -1);
    const kept = cli(['import', '-', '--json', '--from', DAY, '--to', DAY], guard, cut);
    expect(kept.code, kept.stderr).toBe(0);
    expect(JSON.parse(kept.stdout)).toMatchObject({ deleted: 0 });
    expect(await live()).toHaveLength(12);

    const whole = cli(['import', '-', '--json', '--from', DAY, '--to', DAY], guard, toJsonl(fewer));
    expect(whole.code, whole.stderr).toBe(0);
    expect(JSON.parse(whole.stdout)).toMatchObject({ rowsRead: 11, deleted: 1 });
    const gone = await tw.w.pool.query(
      'select message_id::text as id from analytics_messages where _deleted_at is not null',
    );
    expect(gone.rows).toEqual([{ id: records[0]!['Message ID'] }]);
  });

  it('when standard input is empty, then the import reads nothing, changes nothing and exits 0', async () => {
    const before = await live();
    const r = cli(['import', '-', '--json'], env, '');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ linesRead: 0, rowsRead: 0, inserted: 0, deleted: 0 });
    expect(await live()).toEqual(before);
  });
});

/**
 * `crs-sync rejects replay` with --dry-run, --id and --source, end to end. The rejects come from
 * bad lines: lines with a new field `Sentiment`, quarantined `schema_drift` under
 * CRS_RECORD_CONTRACT=freeze (one imported from a file, one read by an export pull), and a line
 * that is not JSON. Accepting the field (`schema accept`) makes the drifted lines loadable; the
 * broken one never is.
 */
describe('rejects replay --dry-run, --id, --source', () => {
  const FILE_DAY = '2026-10-06';
  const EXPORT_DAY = '2026-10-07';
  const fileRecords = makeRecords(5, { day: FILE_DAY, seed: 'replay-file' });
  const exportRecords = makeRecords(5, { day: EXPORT_DAY, seed: 'replay-export' });
  const drifted = { ...makeRecords(1, { day: FILE_DAY, seed: 'drift-file' })[0]!, Sentiment: 'calm' };
  const driftedExport = {
    ...makeRecords(1, { day: EXPORT_DAY, seed: 'drift-export' })[0]!,
    Sentiment: 'tense',
  };
  const broken = `{"Message ID": "${makeRecords(1, { seed: 'broken' })[0]!['Message ID']}", "Input": "cut`;
  let tw: TestWarehouse;
  let env: Record<string, string>;
  const ids: Record<'fileDrift' | 'exportDrift' | 'broken', number> = {
    fileDrift: 0,
    exportDrift: 0,
    broken: 0,
  };

  interface RejectRow {
    id: number;
    source: string;
    error_code: string;
    replayed: boolean;
    resolution: string | null;
    replay_result: string | null;
    times_seen: number;
  }
  const rejects = async () =>
    (
      await tw.w.pool.query<RejectRow>(
        `select id::int, source, error_code, replayed_at is not null as replayed, resolution, replay_result,
                times_seen::int from rejected_records order by id`,
      )
    ).rows;
  const byId = async (id: number) => (await rejects()).find((r) => r.id === id);
  const liveIds = async () =>
    new Set(
      (
        await tw.w.pool.query<{ id: string }>(
          'select message_id::text as id from analytics_messages where _deleted_at is null',
        )
      ).rows.map((r) => r.id),
    );
  const counts = async () =>
    (
      await tw.w.pool.query(
        `select (select count(*)::int from analytics_messages) as messages,
                (select count(*)::int from sync_runs) as runs,
                (select count(*)::int from threads) as threads`,
      )
    ).rows[0];
  /** The replay table's value for a label (`selected`, `loaded`, …). */
  const figure = (out: string, label: string) =>
    new RegExp(`^\\s*${label}\\s+(\\d+)\\s*$`, 'm').exec(out)?.[1] ?? `no "${label}" in:\n${out}`;

  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'replay_cli' });
    env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema, CRS_RECORD_CONTRACT: 'freeze' };
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'crs-replay-')), 'day.jsonl');
    writeFileSync(file, toJsonl([...fileRecords.slice(0, 2), drifted, broken, ...fileRecords.slice(2)]));
    const imp = cli(['import', file, '--no-progress'], env);
    expect(imp.code, imp.stderr).toBe(0);
    expect(imp.stdout).toMatch(row('rejected', 2));
    // An export pull of another day through the loader, as the day's activity runs it.
    await markDayRunning(tw.w.db, EXPORT_DAY, 'pull-1');
    const pulled = await runLoad({
      warehouse: tw.w,
      log,
      target: openDayLoad('pull-1', EXPORT_DAY),
      open: async () =>
        (async function* () {
          yield Buffer.from(toJsonl([...exportRecords, driftedExport]));
        })(),
      contract: exportContract({ freeze: true }),
      batchSize: 100,
      parts: 2,
      maxLineBytes: 1 << 20,
      maxReopens: 0,
    });
    expect(pulled.rejected).toBe(1);
    const all = await rejects();
    expect(all.map((r) => `${r.source} ${r.error_code}`).sort()).toEqual([
      'export schema_drift',
      'file invalid_json',
      'file schema_drift',
    ]);
    const find = (source: string, code: string) =>
      all.find((r) => r.source === source && r.error_code === code)?.id ?? 0;
    ids.fileDrift = find('file', 'schema_drift');
    ids.broken = find('file', 'invalid_json');
    ids.exportDrift = find('export', 'schema_drift');
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when the field is not accepted yet, then --dry-run says all three would stay rejected, by code, and writes nothing', async () => {
    const before = { rejects: await rejects(), counts: await counts() };
    const r = cli(['rejects', 'replay', '--dry-run'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('replay (dry run: nothing written)');
    expect(figure(r.stdout, 'selected')).toBe('3');
    expect(figure(r.stdout, 'would load')).toBe('0');
    expect(figure(r.stdout, 'would stay rejected')).toBe('3');
    expect(figure(r.stdout, 'schema_drift')).toBe('2');
    expect(figure(r.stdout, 'invalid_json')).toBe('1');
    expect({ rejects: await rejects(), counts: await counts() }).toEqual(before);
  });

  it('when the field is accepted, then --dry-run says the two drifted lines would load, and still writes nothing', async () => {
    const accepted = cli(['schema', 'accept', 'export', 'Sentiment'], env);
    expect(accepted.code, accepted.stderr).toBe(0);
    const before = { rejects: await rejects(), counts: await counts() };
    const r = cli(['rejects', 'replay', '--dry-run'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(figure(r.stdout, 'selected')).toBe('3');
    expect(figure(r.stdout, 'would load')).toBe('2');
    expect(figure(r.stdout, 'would stay rejected')).toBe('1');
    expect(figure(r.stdout, 'invalid_json')).toBe('1');
    expect(r.stdout).not.toMatch(/^\s*schema_drift\s/m);
    expect({ rejects: await rejects(), counts: await counts() }).toEqual(before);
    expect((await liveIds()).has(drifted['Message ID'])).toBe(false);
  });

  it('when --id names the file’s drifted line, then only it is replayed: its row loads with the field and its reject closes; the others stay open', async () => {
    const r = cli(['rejects', 'replay', '--id', String(ids.fileDrift)], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('dry run');
    expect(figure(r.stdout, 'selected')).toBe('1');
    expect(figure(r.stdout, 'loaded')).toBe('1');
    expect(figure(r.stdout, 'still rejected')).toBe('0');
    expect(r.stdout).toMatch(/^\s*replay load id\s+\S+/m);
    const row = await tw.w.pool.query('select extra from analytics_messages where message_id = $1', [
      drifted['Message ID'],
    ]);
    expect(row.rows).toEqual([{ extra: { Sentiment: 'calm' } }]);
    expect(await byId(ids.fileDrift)).toMatchObject({ replayed: true, resolution: 'replayed' });
    expect(await byId(ids.exportDrift)).toMatchObject({ replayed: false, times_seen: 1 });
    expect(await byId(ids.broken)).toMatchObject({ replayed: false, times_seen: 1 });
    expect((await liveIds()).has(driftedExport['Message ID'])).toBe(false);
  });

  it('when --source export is given, then only the export pull’s line is replayed, and it loads', async () => {
    const r = cli(['rejects', 'replay', '--source', 'export'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(figure(r.stdout, 'selected')).toBe('1');
    expect(figure(r.stdout, 'loaded')).toBe('1');
    expect(await byId(ids.exportDrift)).toMatchObject({ replayed: true, resolution: 'replayed' });
    expect((await liveIds()).has(driftedExport['Message ID'])).toBe(true);
    expect(await byId(ids.broken)).toMatchObject({ replayed: false, times_seen: 1 });
  });

  it('when --source file is given, then only the broken line is left to select: it fails again, stays open with the new reason, and counts the replay as a read', async () => {
    const messages = (await counts()).messages;
    const r = cli(['rejects', 'replay', '--source', 'file'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(figure(r.stdout, 'selected')).toBe('1');
    expect(figure(r.stdout, 'loaded')).toBe('0');
    expect(figure(r.stdout, 'still rejected')).toBe('1');
    expect(figure(r.stdout, 'invalid_json')).toBe('1');
    const b = await byId(ids.broken);
    expect(b).toMatchObject({ replayed: false, resolution: null, times_seen: 2 });
    expect(b?.replay_result).toMatch(/^still rejected: invalid_json/);
    expect((await counts()).messages).toBe(messages);
  });

  it('when --source or --id is not one the command knows, then it exits 2 naming what it takes; an id no reject has selects nothing', async () => {
    const source = cli(['rejects', 'replay', '--source', 'exports'], env);
    expect(source.code).toBe(2);
    expect(source.stderr).toContain('--source must be one of export, history, artifact, file');
    const id = cli(['rejects', 'replay', '--id', 'x1'], env);
    expect(id.code).toBe(2);
    expect(id.stderr).toContain('--id takes positive whole numbers, not "x1"');
    const before = await rejects();
    const none = cli(['rejects', 'replay', '--id', '999999'], env);
    expect(none.code, none.stderr).toBe(0);
    expect(figure(none.stdout, 'selected')).toBe('0');
    expect(await rejects()).toEqual(before);
  });
});
