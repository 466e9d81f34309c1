import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { type SimulatorOptions, startSimulator } from '../../src/simulator/index.ts';
import { parseDay } from '../../src/simulator/plan.ts';

/**
 * Runs the simulator in a process of its own (started by bench/enrich.ts and bench/intraday.ts
 * with `fork`), so that it stands in for a remote service: it neither shares the client's event
 * loop nor its process. Sends its addresses, credentials (also as the CRS_* variables) and thread ids; answers 'elu' with its
 * event-loop utilisation counters; closes on 'close' (or when the parent goes away).
 *
 * Besides the simulator's options, the JSON argument may hold `clock` (epoch ms: the simulator
 * runs on a stopped clock starting there, moved by `{ type: 'clock', at }` messages, so a bench
 * can walk a day through in minutes) and `threadIds: false` (leave the thread ids out of 'ready':
 * at a million records a day they are millions). `{ type: 'export-shape', day }` answers how the
 * day's export differs from the one seen at the previous such message (exportShape below;
 * `fresh: true` forgets the previous one: a new scenario's first look).
 */
type ProcessOptions = Omit<SimulatorOptions, 'now'> & { clock?: number; threadIds?: boolean };
const { clock, threadIds = true, ...options } = JSON.parse(process.argv[2] ?? '{}') as ProcessOptions;
let now = clock ?? 0;
const sim = await startSimulator(clock === undefined ? options : { ...options, now: () => new Date(now) });
process.send!({
  type: 'ready',
  baseUrl: sim.baseUrl,
  legacyBaseUrl: sim.legacyBaseUrl,
  tokenUrl: sim.tokenUrl,
  credentials: sim.credentials,
  env: sim.env(),
  threadIds: threadIds ? sim.truth.threads().map((t) => t.thread_id) : [],
});
let previous: { day: string; hashes: string[]; bytes: number[] } | null = null;
process.on('message', async (m: unknown) => {
  if (m === 'elu') {
    const { idle, active } = performance.eventLoopUtilization();
    process.send!({ type: 'elu', idle, active });
  } else if (m === 'close') {
    await sim.close();
    process.disconnect();
  } else if (isMessage(m) && m.type === 'clock') {
    now = Number(m.at);
    process.send!({ type: 'clock', at: now });
  } else if (isMessage(m) && m.type === 'export-shape') {
    if (m.fresh === true) previous = null;
    process.send!({ type: 'export-shape', ...exportShape(String(m.day)) });
  }
});
process.on('disconnect', () => process.exit(0));

function isMessage(m: unknown): m is { type: string; [k: string]: unknown } {
  return typeof m === 'object' && m !== null && 'type' in m;
}

/**
 * The day's export as served now against the one seen at the previous call for the same day:
 * whether it only grew at its end (the previous export a byte prefix of this one), the longest
 * common prefix (what a pull could skip after verifying the bytes), the lines new since then that
 * sit before the last line already seen (inserted in the middle), the lines gone or changed, and
 * the lines whose Message Time is earlier than a line before them (the export not in time order).
 */
function exportShape(day: string) {
  // Line by line from the data set's generator: a million-line day as one array of strings would
  // not fit in this process's heap.
  const hashes: string[] = [];
  const bytes: number[] = [];
  let outOfTimeOrder = 0;
  let latest = Number.NEGATIVE_INFINITY;
  for (const l of sim.dataset.exportLines(parseDay(day)!)) {
    hashes.push(createHash('sha1').update(l).digest('base64'));
    bytes.push(Buffer.byteLength(l) + 1);
    const t = Date.parse(/"Message Time":"([^"]+)"/.exec(l)?.[1] ?? '');
    if (t < latest) outOfTimeOrder++;
    else latest = t;
  }
  const prev = previous?.day === day ? previous : { day, hashes: [], bytes: [] };
  let prefixLines = 0;
  let prefixBytes = 0;
  while (prefixLines < prev.hashes.length && prev.hashes[prefixLines] === hashes[prefixLines]) {
    prefixBytes += bytes[prefixLines]!;
    prefixLines++;
  }
  const before = new Set(prev.hashes);
  const now = new Set(hashes);
  let lastSeen = -1;
  hashes.forEach((h, i) => {
    if (before.has(h)) lastSeen = i;
  });
  let insertedMid = 0;
  for (let i = 0; i < lastSeen; i++) if (!before.has(hashes[i]!)) insertedMid++;
  let goneOrChanged = 0;
  for (const h of prev.hashes) if (!now.has(h)) goneOrChanged++;
  previous = { day, hashes, bytes };
  return {
    lines: hashes.length,
    bytes: bytes.reduce((a, b) => a + b, 0),
    previousLines: prev.hashes.length,
    previousBytes: prev.bytes.reduce((a, b) => a + b, 0),
    prefixLines,
    prefixBytes,
    insertedMid,
    goneOrChanged,
    outOfTimeOrder,
  };
}
