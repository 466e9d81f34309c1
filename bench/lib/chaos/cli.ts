import { spawn } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..', '..', '..');

/**
 * `crs-sync ARGS` as a separate process, as an operator runs it; `out` is its standard output
 * when it exits 0, else the tail of both outputs (what says why).
 */
export function runCli(
  env: Record<string, string>,
  args: string[],
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, 'bin', 'crs-sync.js'), ...args], {
      cwd: root,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      err += d;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out: code === 0 ? out : `${out}${err}`.slice(-800) }));
  });
}
