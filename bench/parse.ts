/**
 * Micro-benchmark of the export's hot path: splitLines + parseRecord on generated ~1.6 KB lines,
 * fed in 64 KiB chunks (the size of a file read stream's chunks). No database.
 *
 *   node bench/parse.ts [lines=200000] [rounds=3]
 */
import { randomUUID } from 'node:crypto';
import { splitLines } from '../src/ingest/line-splitter.ts';
import { parseRecord } from '../src/ingest/record-parser.ts';

const lineCount = Number(process.argv[2] ?? 200_000);
const rounds = Number(process.argv[3] ?? 3);
const CHUNK = 64 * 1024;

const words =
  'the churn rate of enterprise accounts rose by four percent in the third quarter while retention improved'.split(
    ' ',
  );

function text(len: number, i: number): string {
  let s = '';
  let k = i;
  while (s.length < len) {
    s += words[k % words.length] + ' ';
    k = (k * 7 + 3) % 9973;
  }
  // Some non-ASCII and an escape-needing character, as real answers have.
  return s.slice(0, len) + (i % 5 === 0 ? ' é 😀 "quoted"\n' : '');
}

function generate(n: number): Buffer {
  const thread = randomUUID();
  const user = randomUUID().toUpperCase();
  const parts: string[] = [];
  for (let i = 0; i < n; i++) {
    const rec: Record<string, unknown> = {
      Input: text(300, i),
      Response: text(1100, i + 1),
      'Message ID': randomUUID(),
      'Message Time': `2026-11-20T${String(i % 24).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}:07.${String(i % 1000).padStart(3, '0')}+05:30`,
      'Thread ID': i % 10 === 0 ? randomUUID() : thread,
      'User ID': user,
    };
    if (i % 4 === 0) rec.Feedback = { score: i % 5, tags: ['a', 'b'] };
    parts.push(JSON.stringify(rec));
  }
  return Buffer.from(parts.join('\n') + '\n');
}

async function* chunks(buf: Buffer): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < buf.length; i += CHUNK) yield buf.subarray(i, Math.min(i + CHUNK, buf.length));
}

const data = generate(lineCount);
const mb = data.length / 1e6;
console.log(
  `${lineCount} lines, ${mb.toFixed(1)} MB, ${(data.length / lineCount).toFixed(0)} B/line avg, node ${process.version}`,
);

for (let r = 1; r <= rounds; r++) {
  let t0 = performance.now();
  let lines = 0;
  for await (const batch of splitLines(chunks(data), { maxLineBytes: 1 << 20 })) lines += batch.length;
  const split = (performance.now() - t0) / 1000;

  t0 = performance.now();
  let ok = 0;
  for await (const batch of splitLines(chunks(data), { maxLineBytes: 1 << 20 })) {
    for (const line of batch) if (parseRecord(line.bytes!.toString('utf8')).ok) ok++;
  }
  const both = (performance.now() - t0) / 1000;
  if (ok !== lineCount || lines !== lineCount)
    throw new Error(`expected ${lineCount} lines, got ${lines} / ${ok} ok`);
  const f = (n: number) => Math.round(n).toLocaleString('en-US');
  console.log(
    `round ${r}: splitter ${f(lines / split)} lines/s ${f(mb / split)} MB/s | ` +
      `splitter+parser ${f(lineCount / both)} lines/s ${f(mb / both)} MB/s`,
  );
}
