import path from 'node:path';
import { measure } from './measure.ts';
import type { ContestResult } from './outcome.ts';

/**
 * Our loader, run the way a user runs it: `crs-sync import FILE --json` as a child process, so
 * its peak RSS is its own. Migrations run before, in a separate command, so neither the wall
 * time nor the summary's elapsedMs of the measured import include them.
 */

const ROOT = path.resolve(import.meta.dirname, '..', '..');

/** Which checkout's CLI runs: this one, or another (a worktree of another commit) to compare. */
export interface OursTarget {
  root: string;
  nodeOptions: string;
}
export const THIS_CHECKOUT: OursTarget = { root: ROOT, nodeOptions: '' };

const cli = (t: OursTarget) => path.join(t.root, 'bin', 'crs-sync.js');

interface Summary {
  rowsRead: number;
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
  bytesRead: number;
  elapsedMs: number;
}

function env(url: string, schema: string, t: OursTarget): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: url, CRS_SCHEMA: schema, LOG_LEVEL: 'warn' };
  if (t.nodeOptions) e.NODE_OPTIONS = t.nodeOptions;
  return e;
}

export async function migrateOurs(url: string, schema: string, t: OursTarget): Promise<string | null> {
  const r = await measure(process.execPath, [cli(t), 'migrate'], { env: env(url, schema, t), cwd: t.root });
  if (r.code !== 0) return `migrate exited ${r.code}: ${r.stderr.trim().slice(-500)}`;
  // `import --help` loads the import command's modules: Node's compile cache then holds them as
  // after any earlier run of the command, so the measured run is the steady state (src/cli/main.ts).
  const w = await measure(process.execPath, [cli(t), 'import', '--help'], {
    env: env(url, schema, t),
    cwd: t.root,
  });
  return w.code === 0 ? null : `import --help exited ${w.code}: ${w.stderr.trim().slice(-500)}`;
}

/**
 * One import of `file` into `schema`. `expect` names the counter that must equal the line count
 * (inserted on a first load, unchanged on a re-load); a mismatch is noted, not fatal.
 */
export async function importOurs(
  name: string,
  file: string,
  lines: number,
  url: string,
  schema: string,
  expect: 'inserted' | 'unchanged',
  t: OursTarget,
): Promise<ContestResult> {
  const r = await measure(process.execPath, [cli(t), 'import', file, '--json', '--no-progress'], {
    env: env(url, schema, t),
    cwd: t.root,
  });
  if (r.code !== 0) return { name, reason: `import exited ${r.code}: ${r.stderr.trim().slice(-800)}` };
  let s: Summary;
  try {
    s = JSON.parse(r.stdout) as Summary;
  } catch {
    return { name, reason: `import printed no JSON summary: ${r.stdout.slice(0, 300)}` };
  }
  const notes: string[] = [];
  if (s[expect] !== lines || s.rowsRead !== lines) {
    notes.push(
      `expected ${lines} ${expect}, got read ${s.rowsRead}, inserted ${s.inserted}, updated ${s.updated}, unchanged ${s.unchanged}, rejected ${s.rejected}`,
    );
  }
  return {
    name,
    rows: s.rowsRead,
    bytes: s.bytesRead,
    seconds: s.elapsedMs / 1000,
    wallS: r.wallS,
    peakRssMb: r.peakRssMb,
    cpuS: r.cpuS,
    pgCpuS: r.pgCpuS,
    notes,
  };
}
