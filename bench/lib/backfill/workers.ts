import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';

// A CommonJS module: its namespaces come through the default export under Node's ESM loader.
const { temporal } = proto;
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

/** Whether `identity` polls the task queue for activities now. */
async function polls(
  client: Client,
  namespace: string,
  taskQueue: string,
  identity: string,
): Promise<boolean> {
  const r = await client.workflowService.describeTaskQueue({
    namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
  });
  return (r.pollers ?? []).some((p) => p.identity === identity);
}

/**
 * Starts a worker and waits until it polls the task queue. A worker that exits on the way is
 * started again, up to `tries` times: on a database shared with many tests, the migration check
 * at start-up reads the catalog while other schemas come and go, and may fail with "schema … does
 * not exist" (the worker exits 1 and says so); a second start finds nothing to migrate.
 */
export async function startPollingWorker(
  client: Client,
  where: { namespace: string; taskQueue: string },
  name: string,
  env: Record<string, string>,
  tries = 3,
): Promise<WorkerProcess> {
  for (let attempt = 1; ; attempt++) {
    const w = startWorker(name, env);
    for (let i = 0; i < 1200; i++) {
      if (w.child.exitCode !== null || w.child.signalCode !== null) break;
      if (await polls(client, where.namespace, where.taskQueue, w.identity)) return w;
      await new Promise((r) => setTimeout(r, 100));
    }
    await w.kill();
    if (attempt >= tries) throw new Error(`worker ${name} did not start polling:\n${w.tail()}`);
    process.stderr.write(`worker ${name} exited while starting; starting it again:\n${w.tail()}\n`);
  }
}
