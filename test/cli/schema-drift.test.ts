import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDashboard } from '../../src/dashboard/server.ts';
import { cliSync } from '../helpers/cli.ts';
import { type FakeRecord, makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Schema drift of the export as a user meets it: files imported with the real CLI into a real
 * Postgres schema, then `crs-sync schema changes`, `schema accept` and `rejects replay`.
 */

function cli(args: string[], env: Record<string, string | undefined>) {
  return cliSync(args, { env, tmpPrefix: 'crs-drift-' });
}

interface DriftJson {
  source: string;
  path: string;
  kind: string;
  expected_type: string | null;
  actual_type: string | null;
  example: string | null;
  first_day: string | null;
  count: number;
  accepted_at: string | null;
}

function changes(env: Record<string, string>): DriftJson[] {
  const r = cli(['schema', 'changes', '--json'], env);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return r.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as DriftJson);
}

/** The file written twice, under two names: two imports with two load ids of the same lines. */
function writeTwice(lines: unknown[]): [string, string] {
  const dir = mkdtempSync(path.join(tmpdir(), 'crs-drift-data-'));
  const a = path.join(dir, 'a.jsonl');
  const b = path.join(dir, 'b.jsonl');
  writeFileSync(a, toJsonl(lines));
  copyFileSync(a, b);
  return [a, b];
}

describe('schema drift of the export', () => {
  let tw: TestWarehouse;
  let env: Record<string, string>;
  beforeAll(async () => {
    tw = await createTestWarehouse({ prefix: 'drift' });
    env = { DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema };
  });
  afterAll(async () => {
    await tw?.dispose();
  });

  it('when an export carries a field the contract does not know, then `schema changes` lists it once with its first day, count and example, and loading it again does not double the count', () => {
    const records: FakeRecord[] = makeRecords(12, { day: '2026-11-20', seed: 'new-field' });
    for (let i = 0; i < 5; i++) (records[i] as FakeRecord).Region = `eu-west-${i}`;
    // A key the service is known to send is not drift.
    (records[6] as FakeRecord).Model = 'crs-research-2';
    const [a, b] = writeTwice(records);

    const first = cli(['import', a, '--no-progress'], env);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/inserted\s+12/);
    const listed = changes(env);
    expect(listed).toEqual([
      {
        source: 'export',
        path: 'Region',
        kind: 'new_field',
        expected_type: null,
        actual_type: 'string',
        // The example is of one of the lines (the partition that committed first).
        example: expect.stringMatching(/^"eu-west-[0-4]"$/),
        first_day: '2026-11-20',
        count: 5,
        accepted_at: null,
        first_seen_at: expect.any(String),
        last_seen_at: expect.any(String),
      },
    ]);

    // The same file again, and the same lines under another name (another load).
    expect(cli(['import', a, '--no-progress'], env).code).toBe(0);
    expect(cli(['import', b, '--no-progress'], env).code).toBe(0);
    const again = changes(env);
    expect(again).toHaveLength(1);
    expect(again[0]?.count).toBe(5);

    const table = cli(['schema', 'changes'], env);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/export\s+│?\s*Region\s+│?\s*new_field/);
  });

  it('when drift is open, then status (text and --json) and the dashboard health page show it, and after `schema accept` they do not', async () => {
    // The Region drift of the test before.
    const status = cli(['status', '--json'], env);
    expect(status.code).toBe(0);
    const drift = (
      JSON.parse(status.stdout) as { schemaDrift: { source: string; path: string; kind: string }[] }
    ).schemaDrift;
    expect(drift.map((d) => [d.source, d.path, d.kind])).toEqual([['export', 'Region', 'new_field']]);
    expect(cli(['status'], env).stdout).toMatch(
      /Schema drift[^\n]*\n(.*\n)*.*export\s+│?\s*Region\s+│?\s*new_field/,
    );

    const dash = await startDashboard({ pool: tw.w.pool, port: 0 });
    try {
      const api = (await (await fetch(`${dash.url}/api/health`)).json()) as {
        sections: Record<string, { ok: boolean; data: { path: string }[] }>;
      };
      expect(api.sections.drift?.data.map((d) => d.path)).toEqual(['Region']);
      expect(await (await fetch(`${dash.url}/health`)).text()).toMatch(/Schema drift[\s\S]*Region/);

      expect(cli(['schema', 'accept', 'export', 'Region'], env).code).toBe(0);
      expect(
        (JSON.parse(cli(['status', '--json'], env).stdout) as { schemaDrift: unknown[] }).schemaDrift,
      ).toEqual([]);
      const after = (await (await fetch(`${dash.url}/api/health`)).json()) as {
        sections: Record<string, { data: unknown[] }>;
      };
      expect(after.sections.drift?.data).toEqual([]);
    } finally {
      await dash.close();
    }
  });

  it('when a field changes its JSON type, then it is listed once with its kind and count; a line quarantined for a missing named field or a poison value adds no drift', () => {
    const records: FakeRecord[] = makeRecords(10, { day: '2026-11-21', seed: 'type-missing' });
    for (let i = 0; i < 3; i++) (records[i] as FakeRecord)['Latency Ms'] = String(1000 + i);
    (records[3] as FakeRecord)['Latency Ms'] = 812;
    // Quarantined lines: counted in the quarantine (and its alert), not as fields the service sends.
    delete (records[4] as Partial<FakeRecord>)['User ID'];
    (records[5] as FakeRecord)['Latency Ms'] = 'slow';
    (records[5] as FakeRecord)['Message ID'] = 'not-a-uuid';
    (records[6] as FakeRecord).Junk = JSON.parse(`${'['.repeat(70)}${']'.repeat(70)}`);
    const [a, b] = writeTwice(records);
    const first = cli(['import', a, '--no-progress'], env);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/rejected\s+3/);
    expect(cli(['import', b, '--no-progress'], env).code).toBe(0);

    const listed = changes(env)
      .filter((d) => d.first_day === '2026-11-21')
      .sort((x, y) => x.path.localeCompare(y.path));
    expect(listed.map((d) => [d.path, d.kind, d.expected_type, d.actual_type, d.count, d.example])).toEqual([
      ['Latency Ms', 'type_changed', 'number', 'string', 3, expect.stringMatching(/^"100[0-2]"$/)],
    ]);
  });

  it('when a new field holds a credential, then its example is masked', () => {
    const records: FakeRecord[] = makeRecords(2, { day: '2026-11-22', seed: 'secret' });
    (records[0] as FakeRecord)['Session Token'] = 'sk-live-4f9a8b7c6d5e4f3a2b1c';
    (records[1] as FakeRecord).Trace = 'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLXNlY3JldA';
    const [a] = writeTwice(records);
    expect(cli(['import', a, '--no-progress'], env).code).toBe(0);
    const r = cli(['schema', 'changes', '--json'], env);
    expect(r.stdout).not.toContain('sk-live-4f9a8b7c6d5e4f3a2b1c');
    expect(r.stdout).not.toContain('c2lnbmF0dXJlLXNlY3JldA');
    const byPath = new Map(changes(env).map((d) => [d.path, d]));
    expect(byPath.get('Session Token')?.example).toBe('[redacted]');
    expect(byPath.get('Trace')?.example).toContain('[redacted]');
  });

  it('when the contract is frozen, then drifted records are quarantined as schema_drift, and after the field is accepted `rejects replay` loads them', () => {
    const frozen = { ...env, CRS_RECORD_CONTRACT: 'freeze' };
    const records: FakeRecord[] = makeRecords(8, { day: '2026-11-23', seed: 'freeze' });
    (records[0] as FakeRecord).Sentiment = 'positive';
    (records[1] as FakeRecord).Sentiment = 'negative';
    const [a] = writeTwice(records);

    const imp = cli(['import', a, '--no-progress'], frozen);
    expect(imp.code).toBe(0);
    expect(imp.stdout).toMatch(/inserted\s+6/);
    expect(imp.stdout).toMatch(/rejected\s+2/);
    const held = cli(['rejects', 'list', '--code', 'schema_drift', '--json'], frozen);
    const rows = held.stdout
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { error_code: string; error_detail: string; message_id: string });
    expect(rows.map((r) => r.message_id).sort()).toEqual(
      [records[0]?.['Message ID'], records[1]?.['Message ID']].sort(),
    );
    expect(rows[0]?.error_detail).toContain('new field "Sentiment"');
    expect(changes(env).find((d) => d.path === 'Sentiment')?.count).toBe(2);

    // Replayed before the contract is widened: still refused.
    const early = cli(['rejects', 'replay', '--code', 'schema_drift'], frozen);
    expect(early.code).toBe(0);
    expect(early.stdout).toMatch(/still rejected\s+│?\s*2/);

    const accept = cli(['schema', 'accept', 'export', 'Sentiment'], frozen);
    expect(accept.code).toBe(0);
    expect(accept.stdout).toContain('accepted');
    const replay = cli(['rejects', 'replay', '--code', 'schema_drift'], frozen);
    expect(replay.code).toBe(0);
    expect(replay.stdout).toMatch(/loaded\s+│?\s*2/);
    const status = JSON.parse(cli(['status', '--json'], frozen).stdout) as { messages: { live: number } };
    expect(status.messages.live).toBeGreaterThanOrEqual(8);
    const open = cli(['schema', 'changes', '--open', '--json'], frozen);
    expect(open.stdout).not.toContain('Sentiment');
  });

  it('when a field nobody has drifted on is accepted, then it exits 2 and says how to see what is open', () => {
    const r = cli(['schema', 'accept', 'export', 'Nothing Here'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('schema changes --open');
    const bad = cli(['schema', 'accept', 'exports', 'X'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('export, thread, history, artifact');
  });

  it('when CRS_RECORD_CONTRACT is neither evolve nor freeze, then every command exits 2 naming it', () => {
    const r = cli(['schema', 'changes'], { ...env, CRS_RECORD_CONTRACT: 'strict' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('CRS_RECORD_CONTRACT');
  });

  it('when a field name holds terminal control characters, then `schema changes` and `status` show them escaped, never raw', () => {
    // Retitles the terminal (OSC 0 … BEL), erases the line (CSI 2K) and returns to its start (CR);
    // then a C1 CSI and a right-to-left override.
    const hostile = '\u001b]0;owned\u0007\u001b[2K\rRegion\u009b\u202e';
    const records: FakeRecord[] = makeRecords(3, { day: '2026-11-21', seed: 'hostile-field' });
    (records[0] as FakeRecord)[hostile] = 'x\u001b[31m';
    const [a] = writeTwice(records);
    expect(cli(['import', a, '--no-progress'], env).code).toBe(0);

    const raw = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/;
    const table = cli(['schema', 'changes'], env);
    expect(table.code).toBe(0);
    expect(table.stdout).not.toMatch(raw);
    expect(table.stdout).toContain('\\x1b]0;owned\\x07\\x1b[2K\\rRegion\\u009b\\u202e');
    // The example is JSON text already (its own escapes).
    expect(table.stdout).toContain('"x\\u001b[31m"');

    const status = cli(['status'], env);
    expect(status.code).toBe(0);
    expect(status.stdout).not.toMatch(raw);
    expect(status.stdout).toContain('\\x1b]0;owned\\x07\\x1b[2K\\rRegion\\u009b\\u202e');

    // JSON stays JSON: the name as it is, escaped by JSON itself.
    expect(changes(env).map((d) => d.path)).toContain(hostile);
  });
});
