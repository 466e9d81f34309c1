import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliClean } from '../helpers/cli.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Every command, spawned as a user runs it, with the usual ways of going wrong: each must end with
 * one line saying what is wrong and the documented exit status (1 failure, 2 bad usage or
 * configuration), never with a stack trace.
 */
const root = path.resolve(import.meta.dirname, '..', '..');
const bin = path.join(root, 'bin', 'crs-sync.js');
const STACK_LINE = /^\s+at /m;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], env: Record<string, string | undefined> = {}): Promise<Result> {
  return cliClean(args, { env, tmpPrefix: 'crs-cli-fail-' });
}

/** What a user sees: stderr without the JSON log lines. */
function said(r: Result): string[] {
  return r.stderr.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('{"level"'));
}

describe('every command, when something is wrong', () => {
  let tw: TestWarehouse;
  let busy: Server;
  let busyPort: number;
  beforeAll(async () => {
    tw = await createTestWarehouse({ migrate: true });
    busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    busyPort = (busy.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise((r) => busy?.close(r));
    await tw?.dispose();
  });

  const noDb = { DATABASE_URL: 'postgres://crs:pw@127.0.0.1:1/crs' };
  const noTemporal = { TEMPORAL_ADDRESS: '127.0.0.1:1' };
  const service = {
    CRS_BASE_URL: 'http://127.0.0.1:1',
    CRS_SERVICE_ACCOUNT_TOKEN: 'x.y.z',
  };
  const db = () => ({ DATABASE_URL: tw.url, CRS_SCHEMA: tw.schema });

  const cases: [
    name: string,
    args: string[],
    env: () => Record<string, string>,
    code: number,
    says: RegExp,
  ][] = [
    ['migrate, database down', ['migrate'], () => noDb, 1, /cannot reach the warehouse database/],
    ['migrate, DATABASE_URL not a URL', ['migrate'], () => ({ DATABASE_URL: 'nope' }), 2, /DATABASE_URL/],
    ['status, database down', ['status'], () => noDb, 1, /cannot reach the warehouse database/],
    [
      'rejects list, database down',
      ['rejects', 'list'],
      () => noDb,
      1,
      /cannot reach the warehouse database/,
    ],
    ['rejects list, bad --limit', ['rejects', 'list', '--limit', 'abc'], db, 2, /--limit/],
    ['import, missing file', ['import', '/no/such/file.jsonl'], db, 1, /cannot read \/no\/such\/file\.jsonl/],
    [
      'import, bad date',
      ['import', '/dev/null', '--from', '2026-13-45', '--to', '2026-01-01'],
      db,
      2,
      /--from/,
    ],
    ['sync, bad date', ['sync', '--from', 'nope'], db, 2, /--from/],
    [
      'sync, Temporal unreachable',
      ['sync', '--from', '2026-01-01', '--to', '2026-01-01'],
      () => ({ ...db(), ...noTemporal }),
      1,
      /cannot reach Temporal/,
    ],
    ['backfill, missing option', ['backfill'], db, 2, /--from/],
    ['schedule, unknown subcommand', ['schedule', 'frob'], db, 2, /unknown command 'frob'/],
    ['worker, service settings missing', ['worker'], db, 2, /CRS_BASE_URL: required/],
    // A taken metrics port is not an error (test/metrics/worker-metrics.test.ts); a malformed one is.
    [
      'worker, malformed metrics port',
      ['worker'],
      () => ({ ...db(), ...service, ...noTemporal, CRS_METRICS_PORT: '94x64' }),
      2,
      /CRS_METRICS_PORT/,
    ],
    ['sim, port taken', ['sim', '--port', 'BUSY'], () => ({}), 2, /cannot listen/],
    [
      'sim, --env-file in a missing directory',
      ['sim', '--port', '0', '--env-out', '/no/such/dir/sim.env'],
      () => ({}),
      1,
      /cannot write \/no\/such\/dir\/sim\.env/,
    ],
    ['sim, bad fault spec', ['sim', '--port', '0', '--faults', 'zzz'], () => ({}), 2, /--faults/],
    ['demo, bad option', ['demo', '--days', 'abc'], () => ({}), 2, /--days/],
    ['any command, unknown option', ['status', '--frobnicate'], db, 2, /unknown option '--frobnicate'/],
    ['any command, bad setting', ['status'], () => ({ CRS_LOOKBACK_DAYS: 'x' }), 2, /CRS_LOOKBACK_DAYS/],
    // Number() would read these as 16 and 1000: refused by name instead.
    [
      'any command, a hex number',
      ['status'],
      () => ({ CRS_DELETE_GUARD: '0x10' }),
      2,
      /^\s+- CRS_DELETE_GUARD: must be a number from 0 to 100, in decimal digits/,
    ],
    [
      'any command, an exponent',
      ['status'],
      () => ({ CRS_BATCH_SIZE: '1e3' }),
      2,
      /^\s+- CRS_BATCH_SIZE: must be a whole number from 1 to 50000, in decimal digits only/,
    ],
  ];

  it.each(cases)(
    'when %s, then it exits with the documented status, one clear line, no stack trace',
    async (_name, args, env, code, says) => {
      // The busy port is known only once the suite has started.
      const r = await run(
        args.map((a) => (a === 'BUSY' ? String(busyPort) : a)),
        env(),
      );
      expect(r.stderr).not.toMatch(STACK_LINE);
      expect(r.code).toBe(code);
      const lines = said(r);
      expect(lines.some((l) => says.test(l))).toBe(true);
      // Commander adds its usage hint; a configuration problem lists one line per bad setting.
      expect(lines.filter((l) => l.startsWith('crs-sync') || l.startsWith('error:')).length).toBe(1);
    },
  );

  it('when an error message quotes data holding terminal control characters, then they are shown escaped', async () => {
    const r = await run(['import', '/no/such/\u001b]0;owned\u0007\u001b[2K\rfile.jsonl'], db());
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(said(r)).toContain(
      'crs-sync: cannot read /no/such/\\x1b]0;owned\\x07\\x1b[2K\\rfile.jsonl: ' +
        "ENOENT: no such file or directory, stat '/no/such/\\x1b]0;owned\\x07\\x1b[2K\\rfile.jsonl'",
    );
  });

  it('when the reader of its output goes away (| head), then it exits quietly', async () => {
    const child = spawn(process.execPath, [bin, 'sim', '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.stdout.once('data', () => child.stdout.destroy());
    const code = await new Promise<number | null>((r) => child.on('close', (c) => r(c)));
    expect(stderr).not.toMatch(STACK_LINE);
    expect(stderr).not.toContain('EPIPE');
    expect(code).toBe(0);
  });

  // A rejection nobody handles, from code loaded into the real CLI before the command runs.
  const preloadFile = path.join(mkdtempSync(path.join(tmpdir(), 'crs-preload-')), 'reject.mjs');
  writeFileSync(preloadFile, "setTimeout(() => Promise.reject(new Error('boom from a library')), 1500);\n");
  const preload = `--import=${pathToFileURL(preloadFile).href}`;

  it('when a promise is rejected and nobody handles it, then the CLI ends with one line and exit 1', async () => {
    const r = await run(['sim', '--port', '0'], { NODE_OPTIONS: preload });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('crs-sync: unexpected error: boom from a library');
    expect(r.stderr).not.toMatch(STACK_LINE);
  });

  it('when LOG_LEVEL=debug, then the same unexpected error comes with its stack trace', async () => {
    const r = await run(['sim', '--port', '0'], { NODE_OPTIONS: preload, LOG_LEVEL: 'debug' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('boom from a library');
    expect(r.stderr).toMatch(STACK_LINE);
  });
});

describe('sim --env-file PATH', () => {
  it('when PATH does not exist yet and the CLI is run as an executable, then the simulator writes it', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'crs-env-file-'));
    const file = path.join(dir, 'sim.env');
    // As `crs-sync …` runs from a shell: through the shebang, with Node 24 first on PATH.
    const child = spawn(bin, ['sim', '--port', '0', '--env-file', file], {
      env: { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? ''}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('CRS_API_KEY=')) resolve();
      });
      child.on('close', () => reject(new Error(`sim ended early: ${stderr}`)));
    });
    child.kill('SIGINT');
    const code = await new Promise<number | null>((r) => child.on('close', (c) => r(c)));
    expect(code).toBe(0);
    expect(existsSync(file)).toBe(true);
    expect(readFileSync(file, 'utf8')).toMatch(/^CRS_BASE_URL=http:\/\/127\.0\.0\.1:\d+$/m);
    expect(stderr).not.toContain('not found');
  });
});

// The machine's own Node when it is older than 24 (bin/crs-sync.js then hands over to Node 24).
const olderNode = ['/usr/bin/node', '/usr/local/bin/node'].find((p) => {
  if (!existsSync(p)) return false;
  const r = spawnSync(p, ['-p', 'process.versions.node'], { encoding: 'utf8' });
  return r.status === 0 && Number(r.stdout.split('.')[0]) < 24;
});

describe.skipIf(!olderNode)('the CLI started by an older Node', () => {
  it('when it is sent SIGTERM, then the command it handed over to stops cleanly and nothing is left running', async () => {
    const child = spawn(olderNode as string, [bin, 'sim', '--port', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const closed = new Promise<number | null>((r) => child.on('close', (c) => r(c)));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('CRS_API_KEY=')) resolve();
      });
      void closed.then(() => reject(new Error(`sim ended early: ${stderr}`)));
    });
    child.kill('SIGTERM');
    expect(await closed).toBe(0);
    // Printed by the Node 24 process once its server is closed: it got the signal and finished.
    expect(stderr).toContain('crs-sync sim: stopped');
    const base = /^CRS_BASE_URL=(\S+)$/m.exec(out)?.[1];
    await expect(fetch(`${base}/openapi.json`)).rejects.toThrow();
  });
});
