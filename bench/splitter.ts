/**
 * The line splitter against split2 (the stream splitter the project was first asked to use), on
 * the same generated export in 64 KiB chunks, in one process, alternating. No database.
 *
 *   node bench/splitter.ts [lines=200000] [rounds=3]
 *
 * Besides speed it prints what each does with the lines a real export can carry: invalid UTF-8
 * (split2 decodes it to U+FFFD, so the exact bytes are gone) and an over-long line (split2's
 * maxLength destroys the stream: the rest of the day is lost).
 */
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import split2 from 'split2';
import { splitLines } from '../src/ingest/parse/line-splitter.ts';

const lineCount = Number(process.argv[2] ?? 200_000);
const rounds = Number(process.argv[3] ?? 3);
const CHUNK = 64 * 1024;

function generate(n: number): Buffer {
  const thread = randomUUID();
  const parts: string[] = [];
  const body = 'the churn rate of enterprise accounts rose by four percent é 😀 "quoted" '.repeat(20);
  for (let i = 0; i < n; i++) {
    parts.push(
      JSON.stringify({
        Input: body.slice(0, 300),
        Response: body,
        'Message ID': randomUUID(),
        'Message Time': '2026-11-20T10:00:07.123+05:30',
        'Thread ID': thread,
        'User ID': thread,
      }),
    );
  }
  return Buffer.from(`${parts.join('\n')}\n`);
}

function* chunks(buf: Buffer): Generator<Buffer> {
  for (let i = 0; i < buf.length; i += CHUNK) yield buf.subarray(i, Math.min(i + CHUNK, buf.length));
}

async function ours(buf: Buffer): Promise<number> {
  let n = 0;
  for await (const batch of splitLines(Readable.from(chunks(buf)), { maxLineBytes: 1 << 20 }))
    n += batch.length;
  return n;
}

async function theirs(buf: Buffer, opts: { maxLength?: number } = {}): Promise<number> {
  let n = 0;
  for await (const _ of Readable.from(chunks(buf)).pipe(split2(opts))) n++;
  return n;
}

const data = generate(lineCount);
const mb = data.length / 1e6;
console.log(`${lineCount} lines, ${mb.toFixed(1)} MB, node ${process.version}`);
const f = (n: number) => Math.round(n).toLocaleString('en-US');
for (let r = 1; r <= rounds; r++) {
  let t0 = performance.now();
  const a = await ours(data);
  const tOurs = (performance.now() - t0) / 1000;
  t0 = performance.now();
  const b = await theirs(data);
  const tTheirs = (performance.now() - t0) / 1000;
  if (a !== lineCount || b !== lineCount) throw new Error(`expected ${lineCount} lines, got ${a} / ${b}`);
  console.log(
    `round ${r}: ours ${f(lineCount / tOurs)} lines/s ${f(mb / tOurs)} MB/s | split2 ${f(lineCount / tTheirs)} lines/s ${f(mb / tTheirs)} MB/s | ours ÷ split2 ${(tTheirs / tOurs).toFixed(2)}×`,
  );
}

// Correctness on hostile lines.
const bad = Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}\n')]);
let kept = 'no';
for await (const batch of splitLines(Readable.from([bad]), { maxLineBytes: 1 << 20 }))
  for (const l of batch)
    if (l.rawBytes?.equals(bad.subarray(0, -1))) kept = 'yes (quarantined as invalid_utf8)';
const decoded: string[] = [];
for await (const l of Readable.from([bad]).pipe(split2())) decoded.push(l as string);
console.log(`invalid UTF-8: ours keeps the exact bytes: ${kept}; split2 gives ${JSON.stringify(decoded[0])}`);

// Chunks smaller than the limit, as a network read delivers them.
const small = (buf: Buffer) =>
  Readable.from(
    Array.from({ length: Math.ceil(buf.length / 256) }, (_, i) => buf.subarray(i * 256, i * 256 + 256)),
  );
const long = Buffer.from(`${'x'.repeat(2048)}\n{"b":1}\n`);
let oursLines = 0;
for await (const batch of splitLines(small(long), { maxLineBytes: 1024 })) oursLines += batch.length;
let split2Lines: number | string = 0;
try {
  for await (const _ of small(long).pipe(split2({ maxLength: 1024 }))) split2Lines++;
} catch (e) {
  split2Lines = `${split2Lines} lines, then error: ${(e as Error).message}`;
}
console.log(
  `over-long line then a good one: ours yields ${oursLines} lines (the first quarantined); split2 with maxLength: ${split2Lines}`,
);
