import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * The simulator in a process of its own (bench/lib/sim-process.ts) on a stopped clock the bench
 * moves: its CPU stays out of the loader's process.cpuUsage(), as a remote service's would.
 */
export interface ClockedSimulator {
  /** The CRS_* variables a client needs. */
  env: Record<string, string>;
  setClock(at: number): Promise<void>;
  /** `fresh`: compare with nothing (a scenario's first pull), not with the last look. */
  exportShape(day: string, fresh: boolean): Promise<ExportShape>;
  close(): Promise<void>;
}

/** How a day's export changed since the previous look (sim-process.ts, exportShape). */
export interface ExportShape {
  lines: number;
  bytes: number;
  previousLines: number;
  previousBytes: number;
  prefixLines: number;
  prefixBytes: number;
  insertedMid: number;
  goneOrChanged: number;
  outOfTimeOrder: number;
}

export async function startClockedSimulator(opts: {
  seed: number;
  days: number;
  recordsPerDay: number;
  clock: number;
}): Promise<ClockedSimulator> {
  const child = fork(
    fileURLToPath(new URL('../sim-process.ts', import.meta.url)),
    [JSON.stringify({ ...opts, threadIds: false })],
    { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
  );
  const ready = await next(child, 'ready');
  return {
    env: ready.env as Record<string, string>,
    setClock: async (at) => {
      const answer = next(child, 'clock');
      child.send({ type: 'clock', at });
      await answer;
    },
    exportShape: async (day, fresh) => {
      const answer = next(child, 'export-shape');
      child.send({ type: 'export-shape', day, fresh });
      return (await answer) as unknown as ExportShape;
    },
    close: async () => {
      if (child.exitCode !== null || !child.connected) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send('close');
      await exited;
    },
  };
}

function next(child: ChildProcess, type: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: Record<string, unknown>) => {
      if (m.type !== type) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(m);
    };
    const onExit = (code: number | null) => reject(new Error(`simulator process exited (${code})`));
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}
