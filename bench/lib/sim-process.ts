import { performance } from 'node:perf_hooks';
import { type SimulatorOptions, startSimulator } from '../../src/simulator/index.ts';

/**
 * Runs the simulator in a process of its own (started by bench/enrich.ts with `fork`), so that
 * it stands in for a remote service: it neither shares the client's event loop nor its
 * process. Sends its addresses, credentials and thread ids; answers 'elu' with its event-loop
 * utilisation counters; closes on 'close' (or when the parent goes away).
 */
const options = JSON.parse(process.argv[2] ?? '{}') as SimulatorOptions;
const sim = await startSimulator(options);
process.send!({
  type: 'ready',
  baseUrl: sim.baseUrl,
  legacyBaseUrl: sim.legacyBaseUrl,
  tokenUrl: sim.tokenUrl,
  credentials: sim.credentials,
  threadIds: sim.truth.threads().map((t) => t.thread_id),
});
process.on('message', async (m: unknown) => {
  if (m === 'elu') {
    const { idle, active } = performance.eventLoopUtilization();
    process.send!({ type: 'elu', idle, active });
  } else if (m === 'close') {
    await sim.close();
    process.disconnect();
  }
});
process.on('disconnect', () => process.exit(0));
