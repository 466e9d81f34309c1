import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..', '..', '..');

/** A `crs-sync worker` child process and the identity it polls Temporal with. */
export interface WorkerProcess {
  name: string;
  child: ChildProcess;
  /** The SDK's default worker identity, `pid@host`: what the histories record as who ran an activity. */
  identity: string;
  /** The last lines it wrote to stderr (for a failure message). */
  tail(): string;
  /** SIGKILL, and wait until it is gone. */
  kill(): Promise<void>;
  /** SIGTERM (a drain), and wait until it is gone. */
  stop(): Promise<void>;
}

/** Starts the real worker command (bin/crs-sync.js worker) with exactly `env` plus PATH and HOME. */
export function startWorker(name: string, env: Record<string, string>): WorkerProcess {
  const child = spawn(process.execPath, [path.join(root, 'bin', 'crs-sync.js'), 'worker'], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      TEMPORAL_METRICS_ADDRESS: '',
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const lines: string[] = [];
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (s: string) => {
    lines.push(...s.split('\n').filter(Boolean));
    if (lines.length > 40) lines.splice(0, lines.length - 40);
  });
  const gone = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill(signal);
    await exited;
  };
  return {
    name,
    child,
    identity: `${child.pid}@${os.hostname()}`,
    tail: () => lines.join('\n'),
    kill: () => gone('SIGKILL'),
    stop: () => gone('SIGTERM'),
  };
}
