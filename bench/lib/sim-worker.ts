import { parentPort, workerData } from 'node:worker_threads';
import { type SimulatorOptions, startSimulator } from '../../src/simulator/index.ts';

/**
 * Runs the simulator on a thread of its own, so that the benchmark measures the client and the
 * enrichment, not a simulator competing for the same event loop. Posts its addresses,
 * credentials and thread ids, then closes when told to.
 */
const sim = await startSimulator(workerData as SimulatorOptions);
parentPort!.postMessage({
  baseUrl: sim.baseUrl,
  legacyBaseUrl: sim.legacyBaseUrl,
  tokenUrl: sim.tokenUrl,
  credentials: sim.credentials,
  threadIds: sim.truth.threads().map((t) => t.thread_id),
});
parentPort!.on('message', async (m: unknown) => {
  if (m === 'close') {
    await sim.close();
    parentPort!.close();
  }
});
