/**
 * Benchmark of the simulator's analytics export: a day of ~1M lines (about 1.6 KB of text,
 * 2 KB of UTF-8 each) is streamed over HTTP from a simulator in its own process; the export's
 * lines/s and the simulator's peak RSS are printed. More rows put it in context: the same day
 * written as bytes without HTTP (writeExportDay, what a file of the export is made with), as JS
 * strings (generateExportLines, the ground truth's form), and the loopback ceiling of this
 * machine (a bare node:http server writing one pre-encoded line of the same size in the same
 * 256 KB chunks).
 *
 *   node bench/sim.ts [--lines N] [--seed S] [--heap MB]     (default N = 1000000)
 *
 * --heap caps the simulator's V8 old space: the export still completes under a small cap,
 * which shows that memory does not grow with the size of the day.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { generateExportLines, startSimulator, writeExportDay } from '../src/simulator/index.ts';

const DAY = '2026-01-10';
const DAY_MS = 86_400_000;
/** A day's export holds about 97% of recordsPerDay (threads reach into neighbour days). */
const LINES_PER_RECORD = 0.97;

const { values } = parseArgs({
  options: {
    lines: { type: 'string', default: '1000000' },
    seed: { type: 'string', default: '42' },
    heap: { type: 'string' },
    // Internal: run as the served process.
    child: { type: 'string' },
    records: { type: 'string' },
  },
});
const seed = Number(values.seed);

interface Served {
  url: string;
  token: string;
  close: () => Promise<void>;
}

async function serveSimulator(records: number): Promise<Served> {
  const fixed = new Date(Date.parse(DAY) + 4 * DAY_MS);
  const sim = await startSimulator({ seed, days: 11, recordsPerDay: records, now: () => fixed });
  return {
    url: `${sim.baseUrl}/v2/analytics/messages?start_date=${DAY}&end_date=${DAY}`,
    token: sim.credentials.serviceAccountToken,
    close: () => sim.close(),
  };
}

/** A bare server writing `lines` copies of one pre-encoded line in 256 KB chunks: what the machine allows. */
async function serveCeiling(lines: number): Promise<Served> {
  const line = Buffer.from(
    `${JSON.stringify({ Input: 'x'.repeat(60), Response: `${'é中📈 quarter '.repeat(105)}` })}\n`,
    'utf8',
  );
  const server = createServer(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    let chunk = Buffer.allocUnsafe(320 * 1024);
    let off = 0;
    for (let i = 0; i < lines; i++) {
      off += line.copy(chunk, off);
      if (off >= 256 * 1024) {
        const ok = res.write(chunk.subarray(0, off));
        chunk = Buffer.allocUnsafe(320 * 1024);
        off = 0;
        if (!ok) await once(res, 'drain');
      }
    }
    res.end(chunk.subarray(0, off));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    token: '',
    close: () => new Promise((r) => server.close(() => r())),
  };
}

async function child(kind: string): Promise<void> {
  const n = Number(values.records);
  const served = kind === 'ceiling' ? await serveCeiling(n) : await serveSimulator(n);
  process.stdout.write(`${JSON.stringify({ url: served.url, token: served.token })}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === 'stop') break;
  }
  await served.close();
  const mem = process.memoryUsage();
  const mb = (x: number) => Math.round(x / 1048576);
  const report = {
    // resourceUsage().maxRSS is in kilobytes: the peak of the whole process life.
    maxRssMb: Math.round(process.resourceUsage().maxRSS / 1024),
    heapUsedMb: mb(mem.heapUsed),
    externalMb: mb(mem.external),
  };
  process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(0));
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

interface Row {
  lines: number;
  bytes: number;
  seconds: number;
  rssMb?: number;
  heapUsedMb?: number;
}

async function overHttp(kind: 'sim' | 'ceiling', n: number): Promise<Row> {
  const heap = values.heap && kind === 'sim' ? [`--max-old-space-size=${values.heap}`] : [];
  const proc = spawn(
    process.execPath,
    [...heap, import.meta.filename, '--child', kind, '--seed', String(seed), '--records', String(n)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const out = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  const hello = JSON.parse((await out.next()).value as string) as { url: string; token: string };
  const t0 = performance.now();
  const { lines, bytes } = await new Promise<{ lines: number; bytes: number }>((resolve, reject) => {
    get(hello.url, { headers: { authorization: `Bearer ${hello.token}` } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`export answered ${res.statusCode}`));
      let l = 0;
      let b = 0;
      res.on('data', (c: Buffer) => {
        l += countNewlines(c);
        b += c.length;
      });
      res.on('end', () => resolve({ lines: l, bytes: b }));
      res.on('error', reject);
    }).on('error', reject);
  });
  const seconds = (performance.now() - t0) / 1000;
  proc.stdin!.write('stop\n');
  const report = JSON.parse((await out.next()).value as string) as { maxRssMb: number; heapUsedMb: number };
  proc.stdin!.end();
  return { lines, bytes, seconds, rssMb: report.maxRssMb, heapUsedMb: report.heapUsedMb };
}

/** writeExportDay into a sink that drops the bytes: the byte path without HTTP (files, fixtures). */
async function toSink(records: number): Promise<Row> {
  const sink = new Writable({
    write(_chunk, _enc, cb) {
      cb();
    },
  });
  const t0 = performance.now();
  const { lines, bytes } = await writeExportDay({ seed, day: DAY, recordsPerDay: records }, sink);
  return { lines, bytes, seconds: (performance.now() - t0) / 1000 };
}

/** generateExportLines: the lines as JS strings (ground truth, tests); bytes taken from `like`. */
function strings(records: number, like: Row): Row {
  const t0 = performance.now();
  let lines = 0;
  for (const _ of generateExportLines({ seed, day: DAY, recordsPerDay: records })) lines++;
  return { lines, bytes: like.bytes, seconds: (performance.now() - t0) / 1000 };
}

function row(name: string, r: Row): string {
  const cells = [
    name.padEnd(41),
    String(r.lines).padStart(9),
    (r.bytes / r.lines).toFixed(0).padStart(6),
    r.seconds.toFixed(2).padStart(6),
    Math.round(r.lines / r.seconds)
      .toString()
      .padStart(9),
    (r.bytes / r.seconds / 1048576).toFixed(1).padStart(6),
    (r.rssMb === undefined ? '-' : String(r.rssMb)).padStart(12),
  ];
  return `| ${cells.join(' | ')} |`;
}

async function main(): Promise<void> {
  const target = Number(values.lines);
  const records = Math.round(target / LINES_PER_RECORD);
  const sim = await overHttp('sim', records);
  const file = await toSink(records);
  const gen = strings(records, file);
  const ceiling = await overHttp('ceiling', sim.lines);
  console.log(
    `simulator export benchmark: day ${DAY}, seed ${seed}, recordsPerDay ${records}, node ${process.version}` +
      (values.heap ? `, simulator heap capped at ${values.heap} MB` : ''),
  );
  console.log(
    '| path                                      |     lines | B/line |      s |   lines/s |   MB/s | peak RSS MB  |',
  );
  console.log(
    '|-------------------------------------------|-----------|--------|--------|-----------|--------|--------------|',
  );
  console.log(row('HTTP export (simulator process)', sim));
  console.log(row('writeExportDay, bytes (no HTTP)', file));
  console.log(row('generateExportLines, strings (no HTTP)', gen));
  console.log(row('HTTP ceiling (constant line, bare server)', ceiling));
  console.log(`simulator heap used after the export: ${sim.heapUsedMb} MB`);
}

if (values.child) await child(values.child);
else await main();
