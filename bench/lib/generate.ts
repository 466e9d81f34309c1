import { closeSync, existsSync, mkdirSync, openSync, renameSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';

/**
 * A deterministic, realistic analytics export (the record of docs/service-contract.md §2) for the ingest
 * benchmark: a few hundred users, thousands of threads, 30 days of times with assorted UTC
 * offsets, ~1.6 KB lines with markdown-ish responses holding some non-ASCII text and characters
 * JSON must escape. Generated once per (lines, seed) and cached, since a million lines is 1.6 GB.
 *
 * Own generator rather than the simulator's: the benchmark needs a stable file shape that does
 * not move when the simulator's content model changes, and it must write 1.6 GB in seconds.
 */

export const GENERATOR_VERSION = 1;

export interface ExportFile {
  path: string;
  lines: number;
  bytes: number;
  /** Whether it was written by this call (false: taken from the cache). */
  generated: boolean;
  generateMs: number;
}

// sfc32: small, fast, good enough for test data, and identical on every platform.
function rng(seed: number): () => number {
  let a = 0x9e3779b9 ^ seed;
  let b = 0x243f6a88;
  let c = 0xb7e15162;
  let d = 1;
  const next = () => {
    a >>>= 0;
    b >>>= 0;
    c >>>= 0;
    d >>>= 0;
    let t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    t = (t + d) | 0;
    c = (c + t) | 0;
    return t >>> 0;
  };
  for (let i = 0; i < 15; i++) next();
  return next;
}

const HEX = '0123456789abcdef';
function uuid(next: () => number): string {
  let s = '';
  for (let w = 0; w < 4; w++) {
    let v = next();
    for (let k = 0; k < 8; k++) {
      s += HEX[v & 15];
      v >>>= 4;
    }
  }
  // Version 4 layout: 8-4-4-4-12 with the version and variant nibbles set.
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-4${s.slice(13, 16)}-${HEX[8 + (s.charCodeAt(16) % 4)]}${s.slice(17, 20)}-${s.slice(20, 32)}`;
}

const WORDS = (
  'the a of to and in for on with by from revenue churn retention cohort quarter growth customers ' +
  'accounts pipeline forecast margin region segment enterprise analysis dataset metric trend increase ' +
  'decrease compared previous period survey respondents sentiment market share pricing competitor ' +
  'report summary source citation document policy regulation supply chain inventory latency model ' +
  'average median percentile distribution weekly monthly annual baseline variance significant'
).split(' ');
const UNICODE_BITS = [
  'café',
  'naïve',
  'Zürich',
  'São Paulo',
  '€1.2M',
  '±3%',
  '—',
  '“quoted”',
  '→',
  '中文数据',
  '日本の売上',
  'Ελλάδα',
  'Москва',
  '📈',
  '✅',
  '👍',
  '≥ 95 %',
];
const ESCAPED_BITS = ['"exact phrase"', 'C:\\reports\\q3.xlsx', 'tab\there', 'a/b', '<b>bold</b>'];
const OFFSETS = [
  'Z',
  '+00:00',
  '-05:00',
  '-04:00',
  '+05:30',
  '+09:00',
  '-08:00',
  '+01:00',
  '+02:00',
  '-03:30',
];

function sentence(next: () => number): string {
  const n = 6 + (next() % 18);
  let s = '';
  for (let i = 0; i < n; i++) {
    const r = next() % 100;
    const w =
      r < 4
        ? UNICODE_BITS[next() % UNICODE_BITS.length]!
        : r < 6
          ? ESCAPED_BITS[next() % ESCAPED_BITS.length]!
          : WORDS[next() % WORDS.length]!;
    s += i === 0 ? w[0]!.toUpperCase() + w.slice(1) : ` ${w}`;
  }
  return `${s}.`;
}

function two(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/**
 * Writes `lines` records to `file`. The first record's time is 2026-10-01 UTC; times grow with
 * the line number over 30 days (an export is roughly time-ordered) with jitter of a few minutes.
 */
export function writeExport(file: string, lines: number, seed: number, threadDays?: number): void {
  const next = rng(seed);
  const sentences: string[] = [];
  for (let i = 0; i < 4096; i++) sentences.push(sentence(next));
  const pick = () => sentences[next() & 4095]!;
  const users: string[] = [];
  for (let i = 0; i < 400; i++) users.push(uuid(next));
  const threadCount = Math.max(2000, Math.floor(lines / 40));
  const threads: string[] = [];
  const threadUser: number[] = [];
  for (let i = 0; i < threadCount; i++) {
    threads.push(uuid(next));
    // Skewed: a few heavy users own many threads.
    const u = next() % 100 < 30 ? next() % 20 : next() % users.length;
    threadUser.push(u);
  }
  const start = Date.UTC(2026, 9, 1);
  const span = 30 * 86_400_000;
  // By default a line's thread is any thread, so every thread has messages on ~22 of the 30
  // days (0.55 thread-days per line at 1M lines). With threadDays, a line's thread is one of the
  // threads started in the last `threadDays` days, so a thread lives about that long, as real
  // threads do: the per-thread-and-day rollups then hold far fewer rows.
  const window = threadDays ? Math.max(1, Math.round((threadCount * threadDays) / 30)) : 0;

  const fd = openSync(file, 'w');
  try {
    let buf = '';
    for (let i = 0; i < lines; i++) {
      let input = pick();
      if (next() % 3 === 0) input += ` ${pick()}`;
      if (next() % 4 === 0) input += ` ${pick()}`;
      const target = 700 + (next() % 900);
      let response = '';
      let para = 0;
      while (response.length < target) {
        response += pick();
        para++;
        if (para % 3 === 0) response += next() % 2 === 0 ? '\n\n- ' : '\n\n';
        else response += ' ';
      }
      const t = window
        ? (Math.floor((i / lines) * (threadCount - window)) + (next() % window)) % threadCount
        : next() % threadCount;
      const ms = start + Math.floor((i / lines) * span) + (next() % 600_000);
      const off = OFFSETS[next() % OFFSETS.length]!;
      let shift = 0;
      if (off !== 'Z') {
        const sign = off[0] === '-' ? -1 : 1;
        shift = sign * (Number(off.slice(1, 3)) * 60 + Number(off.slice(4, 6))) * 60_000;
      }
      const local = new Date(ms + shift);
      const frac = next() % 3;
      const fs =
        frac === 0
          ? ''
          : frac === 1
            ? `.${String(ms % 1000).padStart(3, '0')}`
            : `.${String(ms % 1000).padStart(3, '0')}${String(next() % 1000).padStart(3, '0')}`;
      const time =
        `${local.getUTCFullYear()}-${two(local.getUTCMonth() + 1)}-${two(local.getUTCDate())}` +
        `T${two(local.getUTCHours())}:${two(local.getUTCMinutes())}:${two(local.getUTCSeconds())}${fs}${off}`;
      const rec: Record<string, unknown> = {
        Input: input,
        Response: response,
        'Message ID': uuid(next),
        'Message Time': time,
        'Thread ID': threads[t],
        'User ID': users[threadUser[t]!],
      };
      // A field the spec does not name, on a few records (kept in `extra`).
      if (next() % 100 === 0) rec.Feedback = { rating: next() % 5, tags: ['helpful', 'sources'] };
      buf += `${JSON.stringify(rec)}\n`;
      if (buf.length > 4_000_000) {
        writeSync(fd, buf);
        buf = '';
      }
    }
    if (buf) writeSync(fd, buf);
  } finally {
    closeSync(fd);
  }
}

/**
 * The cached export of `lines` records for `seed`, generated when missing; `threadDays`: threads
 * that live about that many days (see writeExport), another file.
 */
export function ensureExport(dir: string, lines: number, seed: number, threadDays?: number): ExportFile {
  mkdirSync(dir, { recursive: true });
  const shape = threadDays ? `-t${threadDays}` : '';
  const file = path.join(dir, `export-v${GENERATOR_VERSION}-s${seed}-${lines}${shape}.jsonl`);
  if (existsSync(file)) {
    return { path: file, lines, bytes: statSync(file).size, generated: false, generateMs: 0 };
  }
  const t0 = performance.now();
  const tmp = `${file}.${process.pid}.tmp`;
  writeExport(tmp, lines, seed, threadDays);
  renameSync(tmp, file);
  return {
    path: file,
    lines,
    bytes: statSync(file).size,
    generated: true,
    generateMs: performance.now() - t0,
  };
}
