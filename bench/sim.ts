/**
 * Benchmark of the simulator's analytics export: a day of ~1M lines (about 1.6 KB each) is
 * streamed over HTTP from a simulator in its own process, and the export's lines/s and the
 * simulator's peak RSS are printed; the same day is also generated without HTTP.
 *
 *   node bench/sim.ts [--lines N] [--seed S] [--heap MB]     (default N = 1000000)
 *
 * --heap caps the simulator's V8 old space: the export still completes under a small cap,
 * which shows that memory does not grow with the size of the day.
 */
import { spawn } from 'node:child_process';
import { get } from 'node:http';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { generateExportLines, startSimulator } from '../src/simulator/index.ts';

const DAY = '2026-01-10';
const DAY_MS = 86_400_000;
/** A day's export holds about 97.5% of recordsPerDay (threads reach into neighbour days). */
const LINES_PER_RECORD = 0.975;

const { values } = parseArgs({
  options: {
    lines: { type: 'string', default: '1000000' },
    seed: { type: 'string', default: '42' },
    child: { type: 'boolean', default: false },
    records: { type: 'string' },
    /** Caps the simulator's V8 heap (MB), to show that the export runs in constant memory. */
    heap: { type: 'string' },
  },
});
const seed = Number(values.seed);

async function child(): Promise<void> {
  const fixed = new Date(Date.parse(DAY) + 4 * DAY_MS);
  const sim = await startSimulator({
    seed,
    days: 11,
    recordsPerDay: Number(values.records),
    now: () => fixed,
  });
  process.stdout.write(
    `${JSON.stringify({ baseUrl: sim.baseUrl, token: sim.credentials.serviceAccountToken })}\n`,
  );
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === 'stop') break;
  }
  await sim.close();
  // resourceUsage().maxRSS is in kilobytes: the peak of the whole process life.
  const mem = process.memoryUsage();
  const mb = (n: number) => Math.round(n / 1048576);
  const end = { rssMb: mb(mem.rss), heapUsedMb: mb(mem.heapUsed), externalMb: mb(mem.external) };
  process.stdout.write(`${JSON.stringify({ maxRssMb: process.resourceUsage().maxRSS / 1024, end })}\n`, () =>
    process.exit(0),
  );
}

function countNewlines(buf: Buffer): number {
  let n = 0;
  let i = buf.indexOf(10);
  while (i !== -1) {
    n++;
    i = buf.indexOf(10, i + 1);
  }
  return n;
}

async function overHttp(
  records: number,
): Promise<{ lines: number; bytes: number; seconds: number; rssMb: number }> {
  const proc = spawn(
    process.execPath,
    [import.meta.filename, '--child', '--seed', String(seed), '--records', String(records)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const out = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  const hello = JSON.parse((await out.next()).value as string) as { baseUrl: string; token: string };
  const t0 = performance.now();
  const { lines, bytes } = await new Promise<{ lines: number; bytes: number }>((resolve, reject) => {
    const url = `${hello.baseUrl}/v2/analytics/messages?start_date=${DAY}&end_date=${DAY}`;
    get(url, { headers: { authorization: `Bearer ${hello.token}` } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`export answered ${res.statusCode}`));
      let n = 0;
      let b = 0;
      res.on('data', (c: Buffer) => {
        n += countNewlines(c);
        b += c.length;
      });
      res.on('end', () => resolve({ lines: n, bytes: b }));
      res.on('error', reject);
    }).on('error', reject);
  });
  const seconds = (performance.now() - t0) / 1000;
  proc.stdin!.write('stop\n');
  const bye = JSON.parse((await out.next()).value as string) as { maxRssMb: number; end: unknown };
  console.error(`simulator memory after the export: ${JSON.stringify(bye.end)}`);
  proc.stdin!.end();
  return { lines, bytes, seconds, rssMb: bye.maxRssMb };
}

function inProcess(records: number): { lines: number; bytes: number; seconds: number } {
  const t0 = performance.now();
  let lines = 0;
  let bytes = 0;
  for (const line of generateExportLines({ seed, day: DAY, recordsPerDay: records })) {
    lines++;
    bytes += Buffer.byteLength(line) + 1;
  }
  return { lines, bytes, seconds: (performance.now() - t0) / 1000 };
}

async function main(): Promise<void> {
  const target = Number(values.lines);
  const records = Math.round(target / LINES_PER_RECORD);
  const http = await overHttp(records);
  const gen = inProcess(records);
  const row = (name: string, r: { lines: number; bytes: number; seconds: number }, rss: string) =>
    `| ${name.padEnd(34)} | ${String(r.lines).padStart(9)} | ${(r.bytes / r.lines).toFixed(0).padStart(6)} | ${r.seconds.toFixed(2).padStart(6)} | ${Math.round(
      r.lines / r.seconds,
    )
      .toString()
      .padStart(9)} | ${(r.bytes / r.seconds / 1048576).toFixed(1).padStart(6)} | ${rss.padStart(12)} |`;
  console.log(
    `simulator export benchmark: day ${DAY}, seed ${seed}, recordsPerDay ${records}, node ${process.version}`,
  );
  console.log(
    '| path                               |     lines | B/line |      s |   lines/s |   MB/s | peak RSS MB  |',
  );
  console.log(
    '|------------------------------------|-----------|--------|--------|-----------|--------|--------------|',
  );
  console.log(row('HTTP export (simulator process)', http, http.rssMb.toFixed(0)));
  console.log(row('generateExportLines (no HTTP)', gen, '-'));
}

if (values.child) await child();
else await main();
