import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { Connection } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { freePort } from '../common/net.ts';
import { CrsError } from '../errors.ts';
import { ensureTemporalCli } from '../temporal/cli-binary.ts';

export interface DemoTemporal {
  address: string;
  namespace: string;
  /** The web UI, when the demo runs its own dev server. */
  uiUrl: string | undefined;
  /** Whether the server is the demo's own (then it dies with the demo). */
  own: boolean;
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;

/**
 * A Temporal dev server of the demo's own (`temporal server start-dev`: in memory, UI on, bound to
 * 127.0.0.1 on free ports), from the Temporal CLI that ensureTemporalCli() finds or installs;
 * without that CLI, the SDK's own download. Or, given an address, a server already running.
 */
export async function startDemoTemporal(o: {
  address: string | undefined;
  namespace: string;
  log: (line: string) => void;
}): Promise<DemoTemporal> {
  if (o.address) {
    return { address: o.address, namespace: o.namespace, uiUrl: undefined, own: false, stop: async () => {} };
  }
  const cli = await ensureTemporalCli(o.log);
  const uiPort = await freePort();
  if (!cli) return await startWithSdkDownload(uiPort);
  const port = await freePort();
  // Its output is kept for an error message, not shown: the banner would mix with the summary.
  const child = spawn(
    cli,
    [
      'server',
      'start-dev',
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--ui-port',
      String(uiPort),
      '--log-level',
      'error',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const keep = (b: Buffer) => {
    output = (output + b.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const address = `127.0.0.1:${port}`;
  try {
    await waitUntilReady(child, address, () => output);
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  return {
    address,
    namespace: 'default',
    uiUrl: `http://127.0.0.1:${uiPort}`,
    own: true,
    stop: () => stopChild(child),
  };
}

async function waitUntilReady(child: ChildProcess, address: string, output: () => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  let last: unknown;
  while (Date.now() < deadline && !exited) {
    try {
      const c = await Connection.connect({ address, connectTimeout: '1s' });
      try {
        await c.workflowService.describeNamespace({ namespace: 'default' });
        return;
      } finally {
        await c.close();
      }
    } catch (err) {
      last = err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  throw new CrsError(
    'TEMPORAL_UNAVAILABLE',
    `the Temporal dev server did not start${exited ? ` (it exited with ${child.exitCode})` : ''}: ` +
      `${(last as Error | undefined)?.message ?? 'no answer'}\n${output().trim()}`,
  );
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}

async function startWithSdkDownload(uiPort: number): Promise<DemoTemporal> {
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      ip: '127.0.0.1',
      namespace: 'default',
      ui: true,
      uiPort,
      log: { format: 'pretty', level: 'error' },
    },
  });
  return {
    address: env.address,
    namespace: 'default',
    uiUrl: `http://127.0.0.1:${uiPort}`,
    own: true,
    stop: () => env.teardown(),
  };
}
