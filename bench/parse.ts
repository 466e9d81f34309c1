/**
 * Micro-benchmark of the loader's per-line work without a database, on the export bench:ingest
 * loads (bench/lib/generate.ts, cached in bench/out/), fed in 64 KiB chunks (a file read
 * stream's chunk size). Each stage adds to the one before, so the differences are its cost:
 *
 *   split    splitLines
 *   decode   + the line's bytes to a string
 *   parse    + parseRecord (as the loader calls it: no hash, text from UTF-8)
 *   encode   + the line's sha1 and putMessageTuple (binary COPY tuple, record hash from its bytes)
 *
 *   node bench/parse.ts [lines=200000] [rounds=5]
 *   node bench/parse.ts [lines] [rounds] --drift
 *
 * `--drift` measures what schema-drift detection adds to the parse: blocks of 2,000 decoded lines,
 * each parsed with the contract (as the loader parses) and without it (`contract: null`), the
 * order alternating, in the same process; CPU per line of each, and the median of the rounds'
 * ratios.
 *
 * Reported as CPU microseconds per line (process.cpuUsage, so other processes on the machine move
 * it less than wall time), the best of the rounds; and a sha1 of every tuple written, which must
 * not change when the encoder's internals do.
 */
import { createHash, hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ByteSink, putMessageTuple } from '../src/ingest/merge/copy-binary.ts';
import { splitLines } from '../src/ingest/parse/line-splitter.ts';
import { EXPORT_CONTRACT, type ExportContract, parseRecord } from '../src/ingest/parse/record-parser.ts';
import { ensureExport } from './lib/generate.ts';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const driftMode = process.argv.includes('--drift');
const lineCount = Number(args[0] ?? 200_000);
const rounds = Number(args[1] ?? 5);
const CHUNK = 64 * 1024;
const STAGES = ['split', 'decode', 'parse', 'encode'] as const;

const file = ensureExport(path.resolve(import.meta.dirname, 'out'), lineCount, 1);
const data = readFileSync(file.path);

async function* chunks(buf: Buffer): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < buf.length; i += CHUNK) yield buf.subarray(i, Math.min(i + CHUNK, buf.length));
}

const sink = new ByteSink();

/** Runs the stages up to `upto`; returns the lines seen, feeding every tuple to `digest` if given. */
async function run(upto: number, digest?: ReturnType<typeof createHash>): Promise<number> {
  let n = 0;
  sink.reset();
  for await (const lines of splitLines(chunks(data), { maxLineBytes: 1 << 20 })) {
    for (const line of lines) {
      n++;
      if (upto < 1 || line.bytes === undefined) continue;
      const text = line.bytes.toString('utf8');
      if (upto < 2) continue;
      const r = parseRecord(text, { hash: false, fromUtf8: true });
      if (!r.ok) throw new Error(`line ${line.lineNo}: ${r.code} ${r.detail}`);
      if (upto < 3) continue;
      const lineHash = hash('sha1', line.bytes, 'hex');
      if (sink.len > (1 << 21) - (1 << 16)) {
        digest?.update(sink.view(0, sink.len));
        sink.reset();
      }
      putMessageTuple(sink, r.record, line.lineNo, 'bench-load', lineHash);
    }
  }
  digest?.update(sink.view(0, sink.len));
  return n;
}

const check = createHash('sha1');
const seen = await run(3, check);
if (seen !== file.lines) throw new Error(`expected ${file.lines} lines, got ${seen}`);
console.log(
  `${file.lines.toLocaleString('en-US')} lines, ${(file.bytes / 1e6).toFixed(1)} MB (${Math.round(file.bytes / file.lines)} B/line), node ${process.version}; tuples sha1 ${check.digest('hex')}`,
);

if (driftMode) {
  // Blocks of decoded lines, each parsed once with and once without drift detection, the order
  // swapped from block to block: both see the same texts, equally warm, so the machine's other
  // load and the garbage collector fall on both alike.
  const BLOCK = 2000;
  // Options of one shape in both modes, as the loader passes them (a contract, or null for none).
  const parseBlock = (texts: string[], contract: ExportContract | null): number => {
    const c0 = process.cpuUsage();
    for (const text of texts) {
      const r = parseRecord(text, { hash: false, fromUtf8: true, contract });
      if (!r.ok) throw new Error(`${r.code} ${r.detail}`);
    }
    const c = process.cpuUsage(c0);
    return c.user + c.system;
  };
  const ratios: number[] = [];
  for (let r = 1; r <= rounds; r++) {
    let withUs = 0;
    let withoutUs = 0;
    let block: string[] = [];
    let flip = r % 2 === 0;
    const measure = () => {
      if (flip) {
        withoutUs += parseBlock(block, null);
        withUs += parseBlock(block, EXPORT_CONTRACT);
      } else {
        withUs += parseBlock(block, EXPORT_CONTRACT);
        withoutUs += parseBlock(block, null);
      }
      flip = !flip;
      block = [];
    };
    for await (const lines of splitLines(chunks(data), { maxLineBytes: 1 << 20 })) {
      for (const line of lines) {
        if (line.bytes === undefined) continue;
        block.push(line.bytes.toString('utf8'));
        if (block.length === BLOCK) measure();
      }
    }
    if (block.length > 0) measure();
    ratios.push(withUs / withoutUs);
    console.log(
      `round ${r}: parse without drift detection ${(withoutUs / file.lines).toFixed(3)} µs, with ${(withUs / file.lines).toFixed(3)} µs CPU per line: ${((withUs / withoutUs - 1) * 100).toFixed(2)} %`,
    );
  }
  ratios.sort((x, y) => x - y);
  const median = ratios[Math.floor(ratios.length / 2)] ?? Number.NaN;
  console.log(
    `drift detection, median of ${rounds} rounds: ${((median - 1) * 100).toFixed(2)} % of the parse's CPU per line`,
  );
  process.exit(0);
}

const best = STAGES.map(() => Number.POSITIVE_INFINITY);
for (let r = 1; r <= rounds; r++) {
  const row: string[] = [];
  for (let s = 0; s < STAGES.length; s++) {
    const c0 = process.cpuUsage();
    await run(s);
    const c = process.cpuUsage(c0);
    const us = (c.user + c.system) / file.lines;
    best[s] = Math.min(best[s] ?? us, us);
    row.push(`${STAGES[s]} ${us.toFixed(2)}`);
  }
  console.log(`round ${r}: ${row.join(' | ')} µs CPU per line (cumulative)`);
}
const cost = best.map((b, i) => `${STAGES[i]} ${(i === 0 ? b : b - (best[i - 1] ?? 0)).toFixed(2)}`);
console.log(`best, per stage: ${cost.join(' | ')} µs per line; all ${(best[3] ?? 0).toFixed(2)} µs`);
