import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { dropSchemas } from './db.ts';
import { measure } from './measure.ts';
import type { ContestResult } from './outcome.ts';

/**
 * Baseline: dlt from PyPI, installed into bench/.venv on first use, loading the same file with
 * write_disposition="merge" on the message id (bench/dlt_load.py). Anything that goes wrong
 * (no python3, no network for pip, a dlt error) becomes a skip with the reason.
 */

export const DLT_REQUIREMENT = 'dlt[postgres]==1.31.0';
const DLT_VERSION = '1.31.0';

const BENCH = path.resolve(import.meta.dirname, '..');
const VENV = path.join(BENCH, '.venv');
const PY = path.join(VENV, 'bin', 'python');

function run(cmd: string, args: string[]): { ok: boolean; out: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

/** Makes sure bench/.venv holds the pinned dlt; returns why not when it cannot. */
export function ensureDlt(log: (s: string) => void): string | null {
  if (!existsSync(PY)) {
    log(`creating ${path.relative(process.cwd(), VENV)} (python3 -m venv)`);
    const v = run('python3', ['-m', 'venv', VENV]);
    if (!v.ok) return `python3 -m venv failed: ${v.out.trim().slice(-400)}`;
  }
  const have = run(PY, ['-c', 'import dlt, psycopg2; print(dlt.__version__)']);
  if (have.ok && have.out.trim() === DLT_VERSION) return null;
  log(`installing ${DLT_REQUIREMENT} into the venv (pip)`);
  const pip = run(PY, ['-m', 'pip', 'install', '--disable-pip-version-check', '-q', DLT_REQUIREMENT]);
  if (!pip.ok) return `pip install ${DLT_REQUIREMENT} failed: ${pip.out.trim().slice(-400)}`;
  const again = run(PY, ['-c', 'import dlt, psycopg2; print(dlt.__version__)']);
  return again.ok ? null : `dlt does not import after install: ${again.out.trim().slice(-400)}`;
}

export async function runDltBaseline(
  file: string,
  bytes: number,
  url: string,
  dataset: string,
  workDir: string,
  log: (s: string) => void,
): Promise<ContestResult> {
  const name = `dlt ${DLT_VERSION} merge`;
  const why = ensureDlt(log);
  if (why) return { name, reason: why };
  const pipelinesDir = path.join(workDir, 'dlt-pipelines');
  rmSync(pipelinesDir, { recursive: true, force: true });
  try {
    await dropSchemas(url, [dataset, `${dataset}_staging`]);
  } catch (err) {
    return { name, reason: `cannot drop its schemas: ${(err as Error).message}` };
  }
  const r = await measure(
    PY,
    [path.join(BENCH, 'dlt_load.py'), path.resolve(file), url, dataset, pipelinesDir],
    {
      // dlt looks for .dlt/ config next to the working directory; the bench gives it everything.
      cwd: workDir,
      env: { ...process.env, RUNTIME__LOG_LEVEL: 'WARNING' },
    },
  );
  const last = r.stdout.trim().split('\n').at(-1) ?? '';
  let s: { rows: number; elapsed_s: number; extract_s: number; normalize_s: number; load_s: number };
  try {
    s = JSON.parse(last);
  } catch {
    return { name, reason: `dlt_load.py exited ${r.code}: ${(r.stderr || r.stdout).trim().slice(-800)}` };
  }
  return {
    name,
    rows: s.rows,
    bytes,
    seconds: s.elapsed_s,
    wallS: r.wallS,
    peakRssMb: r.peakRssMb,
    cpuS: r.cpuS,
    pgCpuS: r.pgCpuS,
    notes: [
      `extract ${s.extract_s.toFixed(1)} s, normalize ${s.normalize_s.toFixed(1)} s, load ${s.load_s.toFixed(1)} s (default insert_values files, staging dataset + merge)`,
    ],
  };
}
