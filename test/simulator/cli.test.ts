import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** `crs-sync sim`: prints (and writes) the CRS_* variables, serves, and stops cleanly on a signal. */

const BIN = path.resolve('bin/crs-sync.js');
const VARS = [
  'CRS_BASE_URL',
  'CRS_LEGACY_BASE_URL',
  'CRS_SERVICE_ACCOUNT_TOKEN',
  'CRS_TOKEN_URL',
  'CRS_CLIENT_ID',
  'CRS_CLIENT_SECRET',
  'CRS_API_KEY',
];

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'crs-sim-cli-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function parseEnv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line);
    if (m) out[m[1]!] = m[2]!.startsWith('"') ? (JSON.parse(m[2]!) as string) : m[2]!;
  }
  return out;
}

async function runSim(args: string[], signal: NodeJS.Signals) {
  const child = spawn(process.execPath, [BIN, 'sim', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
      if (stdout.includes('CRS_API_KEY=')) resolve();
    });
    child.on('exit', () => reject(new Error(`sim exited early: ${stderr}`)));
  });
  const env = parseEnv(stdout);
  const doc = await fetch(`${env.CRS_BASE_URL}/openapi.json`);
  const export_ = await fetch(
    `${env.CRS_BASE_URL}/v2/analytics/messages?start_date=2000-01-01&end_date=2000-01-01`,
    {
      headers: { authorization: `Bearer ${env.CRS_SERVICE_ACCOUNT_TOKEN}` },
    },
  );
  await export_.arrayBuffer();
  child.kill(signal);
  return {
    env,
    stdout,
    docStatus: doc.status,
    exportStatus: export_.status,
    code: await exited,
    stderr: () => stderr,
  };
}

describe('crs-sync sim', () => {
  it('when started with --env-out, then it prints and writes every CRS_* variable, serves, and exits 0 on SIGTERM', async () => {
    const file = path.join(dir, 'sim.env');
    const run = await runSim(
      ['--seed', '5', '--days', '2', '--faults', 'latency=1ms', '--env-out', file],
      'SIGTERM',
    );
    for (const v of VARS) {
      expect(run.env[v], v).toMatch(v.endsWith('_URL') ? /^http:\/\/127\.0\.0\.1:\d+(\/\S*)?$/ : /^\S{8,}$/);
    }
    expect(parseEnv(await readFile(file, 'utf8'))).toEqual(run.env);
    expect(run.docStatus).toBe(200);
    expect(run.exportStatus).toBe(200);
    expect(run.code).toBe(0);
    expect(run.stderr()).toContain('stopped');
  });

  it('when started with --env-file naming an existing file, then it overwrites it and exits 0 on SIGINT', async () => {
    const file = path.join(dir, 'existing.env');
    await writeFile(file, '');
    const run = await runSim(['--env-file', file], 'SIGINT');
    expect(parseEnv(await readFile(file, 'utf8'))).toEqual(run.env);
    expect(run.code).toBe(0);
  });

  it('when the fault spec is invalid, then it exits 2 and names the problem', async () => {
    const child = spawn(process.execPath, [BIN, 'sim', '--port', '0', '--faults', 'cut=7'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toMatch(/--faults: fault cut/);
  });
});
