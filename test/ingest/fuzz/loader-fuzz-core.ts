import { isUtf8 } from 'node:buffer';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import type { Config } from '../../../src/config.ts';
import type { LoadSummary } from '../../../src/ingest/merge/load.ts';
import { importFile } from '../../../src/ingest/source/import-file.ts';
import type { Logger } from '../../../src/log.ts';
import type { Warehouse } from '../../../src/warehouse/db.ts';
import { type FakeRecord, makeRecords } from '../../helpers/export-lines.ts';
import { type HeldSeenTally, heldSeenCheck, newHeldSeenTally } from './held-seen-check.ts';

/**
 * The loader's fuzz property: valid export lines, mutated in ways the world mutates them (byte
 * flips, truncation, deep nesting, numbers beyond a double or PostgreSQL, odd Unicode, NUL, BOM,
 * duplicate keys, white space, impossible dates, key limits, huge lines), written to a file and
 * imported through the real loader into real PostgreSQL. It holds when the load never fails and
 * every line is accounted for exactly once: a row of analytics_messages (or overtaken by a later
 * line of the same message id), a row of rejected_records, or a blank line, with the summary, the
 * run ledger and the checkpoints agreeing. Lines are classified here independently of the loader
 * (split on LF, BOM on line 1, CR, white space), so a line the loader silently drops is caught.
 * Every eighth case also runs `lateIdCheck` (an over-long line with its id beyond the kept prefix,
 * in a day declared complete), and every second `heldSeenCheck` (deletes held, then the held ids
 * seen again by later loads, then `deletes apply`).
 */

export interface FuzzTally {
  lines: number;
  rows: number;
  blank: number;
  imports: number;
  failedLoads: number;
  byCode: Map<string, number>;
  heldSeen: HeldSeenTally;
}

export function newTally(): FuzzTally {
  return {
    lines: 0,
    rows: 0,
    blank: 0,
    imports: 0,
    failedLoads: 0,
    byCode: new Map(),
    heldSeen: newHeldSeenTally(),
  };
}

type Mutation =
  | { kind: 'valid' }
  | { kind: 'crlf' }
  | { kind: 'flip'; at: number; byte: number }
  | { kind: 'truncate'; at: number }
  | { kind: 'nest'; levels: number; array: boolean }
  | { kind: 'number'; text: string; named: boolean }
  | { kind: 'unicode'; text: string; raw: boolean }
  | { kind: 'bytes'; insert: readonly number[]; at: number }
  | { kind: 'duplicateKey'; key: string; value: string }
  | { kind: 'blank'; text: string }
  | { kind: 'time'; text: string }
  | { kind: 'longKey'; chars: number }
  | { kind: 'manyKeys'; count: number }
  | { kind: 'extraJson'; value: unknown }
  | { kind: 'garbage'; bytes: number[] }
  | { kind: 'huge'; chars: number }
  | { kind: 'repeat' };

const NUMBERS = [
  '1e400',
  '-1e400',
  '1e-400',
  '-1e-400',
  '-0',
  '-0.0',
  '0e-16384',
  '1e-20000',
  '1e200000',
  '1e131071',
  '1e131072',
  '1E+308',
  '1.7976931348623157e309',
  '5e-324',
  '9007199254740993',
  '123456789012345678901234567890123456789',
  `1${'0'.repeat(131_072)}`,
  '0.1',
  '3.14159265358979323846264338327950288',
  '1e99999999999',
  'NaN',
  'Infinity',
  '01',
  '.5',
  '1.',
  '+1',
];

const UNICODE = [
  '\\ud800',
  '\\udfff',
  '\\ud83d\\ude00',
  '\\u0000',
  '\\u2028\\u2029',
  '\\ufeff',
  'é😀\u{10FFFF}\u200b\u202e',
  '\\"\\\\\\/\\b\\f\\n\\r\\t',
  '\\uD800\\uDC00',
  '\\u00',
  '\\x41',
];

const TIMES = [
  '2026-02-30T10:00:00Z',
  '2026-02-29T10:00:00Z',
  '2026-13-01T10:00:00Z',
  '2026-00-10T10:00:00Z',
  '2026-11-20T24:00:00Z',
  '2026-11-20T10:60:00Z',
  '2026-11-20T10:00:60Z',
  '0000-01-01T00:00:00Z',
  '0001-01-01T00:30:00+01:00',
  '9999-12-31T23:00:00-05:00',
  '2026-11-20T10:00:00',
  '2026-11-20 10:00:00Z',
  '2026-11-20T10:00:00+19:00',
  '2026-11-20T10:00:00.1234567890+05:30',
  '2026-11-20t10:00:00z',
  '2028-02-29T23:59:59-00:00',
  '',
];

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: fc.constant({ kind: 'valid' as const }), weight: 30 },
  { arbitrary: fc.constant({ kind: 'crlf' as const }), weight: 2 },
  { arbitrary: fc.constant({ kind: 'repeat' as const }), weight: 3 },
  {
    arbitrary: fc.record({
      kind: fc.constant('flip' as const),
      at: fc.double({ min: 0, max: 1, noNaN: true }),
      byte: fc.integer({ min: 0, max: 255 }),
    }),
    weight: 8,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('truncate' as const),
      at: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
    weight: 4,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('nest' as const),
      levels: fc.oneof(fc.integer({ min: 1, max: 70 }), fc.constantFrom(62, 63, 64, 10_000)),
      array: fc.boolean(),
    }),
    weight: 5,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('number' as const),
      text: fc.constantFrom(...NUMBERS),
      named: fc.boolean(),
    }),
    weight: 6,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('unicode' as const),
      text: fc.constantFrom(...UNICODE),
      raw: fc.boolean(),
    }),
    weight: 5,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('bytes' as const),
      insert: fc.constantFrom(
        [0],
        [0xef, 0xbb, 0xbf],
        [0xed, 0xa0, 0x80],
        [0xc0, 0xaf],
        [0xff],
        [0xf4, 0x90, 0x80, 0x80],
        [0x0d],
        [0x09],
      ),
      at: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
    weight: 5,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('duplicateKey' as const),
      key: fc.constantFrom('Input', 'Message ID', 'Message Time', 'Response', 'extra'),
      value: fc.constantFrom('"dup"', '1', 'null', '{"a":1}', '"2026-11-02T00:00:00Z"'),
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('blank' as const),
      text: fc.constantFrom('', ' ', '   ', '\t', ' \t \r', '\r', '\f', '\u00a0'),
    }),
    weight: 4,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('time' as const), text: fc.constantFrom(...TIMES) }),
    weight: 5,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('longKey' as const), chars: fc.constantFrom(1024, 1025, 5000) }),
    weight: 1,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('manyKeys' as const), count: fc.constantFrom(9_999, 10_001) }),
    weight: 1,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('extraJson' as const), value: fc.jsonValue({ maxDepth: 4 }) }),
    weight: 5,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('garbage' as const),
      bytes: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 60 }),
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('huge' as const), chars: fc.constantFrom(300_000) }),
    weight: 1,
  },
);

export interface FuzzCase {
  seed: number;
  lines: Mutation[];
}

export function fuzzCase(linesPerRun: number): fc.Arbitrary<FuzzCase> {
  return fc.record({
    seed: fc.nat(),
    lines: fc.array(mutation, { minLength: linesPerRun, maxLength: linesPerRun }),
  });
}

const withTail = (rec: FakeRecord, tail: string) => `${JSON.stringify(rec).slice(0, -1)},${tail}}`;

/** The bytes of one line (without its LF) for a record and a mutation. */
function lineBytes(rec: FakeRecord, prev: string | undefined, m: Mutation): Buffer {
  const json = JSON.stringify(rec);
  const b = Buffer.from(json);
  switch (m.kind) {
    case 'valid':
      return b;
    case 'crlf':
      return Buffer.from(`${json}\r`);
    case 'repeat':
      return Buffer.from(prev ?? json);
    case 'flip': {
      const c = Buffer.from(b);
      c[Math.min(c.length - 1, Math.floor(m.at * c.length))] = m.byte;
      return c;
    }
    case 'truncate':
      return b.subarray(0, Math.floor(m.at * b.length));
    case 'nest': {
      const [o, c] = m.array ? ['[', ']'] : ['{"a":', '}'];
      return Buffer.from(
        withTail(rec, `"nest":${o.repeat(m.levels)}${m.array ? '' : '1'}${c.repeat(m.levels)}`),
      );
    }
    case 'number':
      return Buffer.from(
        m.named
          ? json.replace(/"Response":"(?:[^"\\]|\\.)*"/, `"Response":${m.text}`)
          : withTail(rec, `"num":{"v":[${m.text}]}`),
      );
    case 'unicode':
      return Buffer.from(
        m.raw
          ? withTail(
              rec,
              `"u":"${JSON.parse(`"${m.text.replace(/\\u00$|\\x41/, '')}"`)}"`.replace(/[\n\r]/g, ' '),
            )
          : json.replace('"Input":"', `"Input":"${m.text}`),
      );
    case 'bytes': {
      const at = Math.floor(m.at * b.length);
      return Buffer.concat([b.subarray(0, at), Buffer.from(m.insert), b.subarray(at)]);
    }
    case 'duplicateKey':
      return Buffer.from(withTail(rec, `"${m.key}":${m.value}`));
    case 'blank':
      return Buffer.from(m.text);
    case 'time':
      return Buffer.from(JSON.stringify({ ...rec, 'Message Time': m.text }));
    case 'longKey':
      return Buffer.from(withTail(rec, `"${'k'.repeat(m.chars)}":1`));
    case 'manyKeys':
      return Buffer.from(withTail(rec, Array.from({ length: m.count }, (_, i) => `"k${i}":${i}`).join(',')));
    case 'extraJson':
      return Buffer.from(withTail(rec, `"j":${JSON.stringify(m.value)}`));
    case 'garbage':
      return Buffer.from(m.bytes);
    case 'huge':
      return Buffer.from(JSON.stringify({ ...rec, Input: 'x'.repeat(m.chars) }));
  }
}

export function fileOf(c: FuzzCase): Buffer {
  const recs = makeRecords(c.lines.length, { seed: `fuzz${c.seed}` });
  const parts: Buffer[] = [];
  let prev: string | undefined;
  c.lines.forEach((m, i) => {
    const line = lineBytes(recs[i]!, prev, m);
    parts.push(line, Buffer.from('\n'));
    prev = JSON.stringify(recs[i]);
  });
  return Buffer.concat(parts);
}

interface Classified {
  total: number;
  blank: Set<number>;
  /** Line number to its bytes, for every line that is not blank. */
  text: Map<number, Buffer>;
}

/** The lines of a file as the contract defines them, without the loader's code. */
export function classify(file: Buffer, maxLineBytes: number): Classified {
  const out: Classified = { total: 0, blank: new Set(), text: new Map() };
  let start = 0;
  let lineNo = 0;
  while (start < file.length) {
    let end = file.indexOf(10, start);
    const next = end === -1 ? file.length : end + 1;
    if (end === -1) end = file.length;
    lineNo++;
    let line = file.subarray(start, end);
    start = next;
    if (lineNo === 1 && line[0] === 0xef && line[1] === 0xbb && line[2] === 0xbf) line = line.subarray(3);
    if (line.length > 0 && line[line.length - 1] === 13) line = line.subarray(0, -1);
    const white = line.every((c) => c === 32 || c === 9 || c === 13);
    if (line.length === 0 || (white && line.length <= maxLineBytes)) out.blank.add(lineNo);
    else out.text.set(lineNo, line);
  }
  out.total = lineNo;
  return out;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function fail(msg: string): never {
  throw new Error(msg);
}

/** Imports `file` and checks every invariant; returns the summary. */
async function importAndCheck(
  w: Warehouse,
  config: Config,
  log: Logger,
  file: string,
  bytes: Buffer,
  tally: FuzzTally,
): Promise<LoadSummary> {
  tally.imports++;
  let s: LoadSummary;
  try {
    s = await importFile(w, config, log, { file });
  } catch (err) {
    tally.failedLoads++;
    throw new Error(`the load failed: ${(err as Error).message}`, { cause: err });
  }
  const cls = classify(bytes, config.maxLineBytes);
  const nonBlank = cls.total - cls.blank.size;
  if (s.linesRead !== cls.total) fail(`linesRead ${s.linesRead}, the file has ${cls.total} lines`);
  if (s.rowsRead !== nonBlank) fail(`rowsRead ${s.rowsRead}, the file has ${nonBlank} non-blank lines`);
  if (s.inserted + s.updated + s.unchanged + s.rejected !== s.rowsRead) {
    fail(
      `inserted+updated+unchanged+rejected = ${s.inserted + s.updated + s.unchanged + s.rejected} ≠ rowsRead ${s.rowsRead}`,
    );
  }

  // One open reject per line, whichever loads read it (the same bytes twice in a file are one line):
  // the rows this load read last, matched to the file's lines by the contract's rule: the SHA-256
  // of the bytes; an over-long line, kept as a prefix, by that prefix and its length.
  const rj = await w.pool.query<{
    error_code: string;
    raw_length: string;
    line_digest: Buffer;
    raw_bytes: Buffer | null;
  }>('select error_code, raw_length, line_digest, raw_bytes from rejected_records where last_load_id = $1', [
    s.loadId,
  ]);
  const byDigest = new Map<string, { code: string; rawLength: number }>();
  const overLong: { prefix: Buffer; length: number; matched: boolean }[] = [];
  for (const r of rj.rows) {
    if (r.error_code === 'line_too_long') {
      overLong.push({ prefix: r.raw_bytes ?? Buffer.alloc(0), length: Number(r.raw_length), matched: false });
      continue;
    }
    const key = r.line_digest.toString('hex');
    if (byDigest.has(key)) fail(`line ${key} quarantined twice`);
    byDigest.set(key, { code: r.error_code, rawLength: Number(r.raw_length) });
  }
  const rejected = new Map<number, string>();
  const matched = new Set<string>();
  for (const [no, line] of cls.text) {
    if (line.length > config.maxLineBytes) {
      const rows = overLong.filter(
        (o) => o.length === line.length && line.subarray(0, o.prefix.length).equals(o.prefix),
      );
      if (rows.length === 0) fail(`line ${no} is over-long but was not quarantined`);
      for (const o of rows) o.matched = true;
      rejected.set(no, 'line_too_long');
      continue;
    }
    const key = createHash('sha256').update(line).digest('hex');
    const r = byDigest.get(key);
    if (!r) continue;
    if (r.rawLength !== line.length)
      fail(`line ${no}: raw_length ${r.rawLength}, the line has ${line.length} bytes`);
    rejected.set(no, r.code);
    matched.add(key);
  }
  if (matched.size !== byDigest.size || overLong.some((o) => !o.matched))
    fail('a rejected_records row matches no line of the file');
  if (rejected.size !== s.rejected) fail(`${rejected.size} lines quarantined, summary says ${s.rejected}`);

  // Every other line must be a record: its message id's row is its own or a later line's.
  const lastOfId = new Map<string, { lineNo: number; input: string; response: string }>();
  const linesOfId = new Map<string, Set<number>>();
  for (const [no, line] of cls.text) {
    if (rejected.has(no)) continue;
    if (!isUtf8(line)) fail(`line ${no} is not UTF-8 but was not quarantined`);
    let v: Record<string, unknown>;
    try {
      v = JSON.parse(line.toString('utf8'));
    } catch {
      fail(`line ${no} is not JSON but was not quarantined`);
    }
    const id = v['Message ID'];
    if (typeof id !== 'string' || !UUID.test(id))
      fail(`line ${no} has no valid Message ID but was not quarantined`);
    const key = id.toLowerCase();
    lastOfId.set(key, { lineNo: no, input: v.Input as string, response: v.Response as string });
    let set = linesOfId.get(key);
    if (!set) {
      set = new Set();
      linesOfId.set(key, set);
    }
    set.add(no);
  }
  const rows = await w.pool.query<{ id: string; l: string; input: string; response: string }>(
    'select message_id::text as id, _source_line as l, input, response from analytics_messages where _deleted_at is null',
  );
  if (rows.rows.length !== lastOfId.size)
    fail(`${rows.rows.length} rows, ${lastOfId.size} distinct accepted message ids`);
  for (const r of rows.rows) {
    const last = lastOfId.get(r.id) ?? fail(`row ${r.id} comes from no accepted line`);
    if (!linesOfId.get(r.id)!.has(Number(r.l)))
      fail(`row ${r.id}: _source_line ${r.l} is not one of its lines`);
    if (r.input !== last.input || r.response !== last.response) {
      fail(`row ${r.id} does not hold its last line (${last.lineNo})`);
    }
  }

  const run = await w.pool.query<{ status: string; rows_read: string; rows_rejected: string }>(
    'select status, rows_read, rows_rejected from sync_runs where load_id = $1',
    [s.loadId],
  );
  const r0 = run.rows[0];
  if (
    r0?.status !== 'succeeded' ||
    Number(r0.rows_read) !== s.rowsRead ||
    Number(r0.rows_rejected) !== s.rejected
  ) {
    fail(`sync_runs disagrees with the summary: ${JSON.stringify(r0)}`);
  }
  const cp = await w.pool.query<{ r: string; j: string; l: string }>(
    'select sum(rows_read) as r, sum(rows_rejected) as j, min(lines_committed) as l from load_checkpoints where load_key = $1',
    [s.loadId],
  );
  const c0 = cp.rows[0]!;
  if (Number(c0.r) !== s.rowsRead || Number(c0.j) !== s.rejected || Number(c0.l) !== cls.total) {
    fail(`load_checkpoints disagree with the summary: ${JSON.stringify(c0)}`);
  }

  tally.lines += cls.total;
  tally.blank += cls.blank.size;
  tally.rows += s.rowsRead - s.rejected;
  for (const code of rejected.values()) tally.byCode.set(code, (tally.byCode.get(code) ?? 0) + 1);
  return s;
}

const LATE_ID_DAY = '2026-10-30';

/**
 * The "over-long line with a late id" case: a day imported in full as its complete export, then
 * again with one line grown past CRS_MAX_LINE_BYTES so that its `Message ID` and `Message Time`
 * lie beyond the 64 KiB the quarantine keeps. Expected: the line is the day's one reject, with
 * its id and day; no row of the day is deleted or held; the day's ledger counts 1 rejected.
 * Which line, and how long (so where the id falls against the file's read chunks), follow the seed.
 */
async function lateIdCheck(
  w: Warehouse,
  config: Config,
  log: Logger,
  dir: string,
  seed: number,
  tally: FuzzTally,
): Promise<void> {
  const recs = makeRecords(40, { day: LATE_ID_DAY, seed: `late${seed}` });
  const lines = recs.map((r) => JSON.stringify(r));
  const victim = seed % lines.length;
  const pad = config.maxLineBytes + (seed % 70_000);
  const grown = lines.map((l, i) =>
    i === victim ? l.replace('{"Input":"', `{"Input":"${'p'.repeat(pad)}`) : l,
  );
  const days = { from: LATE_ID_DAY, to: LATE_ID_DAY };
  const full = path.join(dir, `late${seed}-full.jsonl`);
  const long = path.join(dir, `late${seed}-long.jsonl`);
  writeFileSync(full, `${lines.join('\n')}\n`);
  writeFileSync(long, `${grown.join('\n')}\n`);
  tally.imports += 2;
  await importFile(w, config, log, { file: full, wholeDays: days });
  const s = await importFile(w, config, log, { file: long, wholeDays: days });
  rmSync(full);
  rmSync(long);
  const id = recs[victim]!['Message ID'];
  const live = await w.pool.query<{ n: number }>(
    'select count(*)::int as n from analytics_messages where message_date = $1 and _deleted_at is null',
    [LATE_ID_DAY],
  );
  if (live.rows[0]?.n !== lines.length) fail(`late id: ${live.rows[0]?.n} of ${lines.length} rows live`);
  const rj = await w.pool.query<{ code: string; id: string | null; day: string | null }>(
    'select error_code as code, message_id::text as id, day::text as day from rejected_records where _load_id = $1',
    [s.loadId],
  );
  const r0 = rj.rows[0];
  if (rj.rows.length !== 1 || r0?.code !== 'line_too_long' || r0.id !== id || r0.day !== LATE_ID_DAY) {
    fail(`late id: the rejects of line ${victim + 1} (id ${id}) are ${JSON.stringify(rj.rows)}`);
  }
  const led = await w.pool.query<{ j: number; d: number; h: number }>(
    'select rows_rejected::int as j, rows_deleted::int as d, deletes_held::int as h from sync_days where day = $1',
    [LATE_ID_DAY],
  );
  const l0 = led.rows[0];
  if (l0?.j !== 1 || l0.d !== 0 || l0.h !== 0) fail(`late id: the day's ledger is ${JSON.stringify(l0)}`);
  tally.lines += 2 * lines.length;
  tally.rows += 2 * lines.length - 1;
  tally.byCode.set('line_too_long (late id)', (tally.byCode.get('line_too_long (late id)') ?? 0) + 1);
}

export interface FuzzOptions {
  w: Warehouse;
  config: Config;
  log: Logger;
  seed: number;
  lines: number;
  linesPerRun?: number;
  tally: FuzzTally;
}

/** Runs the property; throws fast-check's report (seed, path, counterexample) when it fails. */
export async function runFuzz(o: FuzzOptions): Promise<void> {
  const perRun = Math.min(o.linesPerRun ?? 500, o.lines);
  const dir = mkdtempSync(path.join(tmpdir(), 'crs-fuzz-'));
  let n = 0;
  let heldChecks = 0;
  try {
    await fc.assert(
      fc.asyncProperty(fuzzCase(perRun), async (c) => {
        await o.w.pool.query('truncate analytics_messages, rejected_records, thread_queue');
        const bytes = fileOf(c);
        const file = path.join(dir, `case${n++}.jsonl`);
        writeFileSync(file, bytes);
        await importAndCheck(o.w, o.config, o.log, file, bytes, o.tally);
        // Every fourth case again, as a re-load: the fast path (lines compared as bytes) must
        // account for every line the same way.
        if (c.seed % 4 === 0) await importAndCheck(o.w, o.config, o.log, file, bytes, o.tally);
        rmSync(file);
        // The first case and every eighth after it, so that a short run has it too.
        if (n % 8 === 1) await lateIdCheck(o.w, o.config, o.log, dir, c.seed, o.tally);
        // Every second case. The first is the sequence of issue 20 itself (held rows re-loaded
        // unchanged, then applied), so that a short run always has it; the others vary by seed.
        if (n % 2 === 0) {
          const only = heldChecks++ === 0 ? 'unchanged' : undefined;
          await heldSeenCheck(o.w, o.config, o.log, dir, c.seed, o.tally, only);
        }
      }),
      { seed: o.seed, numRuns: Math.ceil(o.lines / perRun), endOnFailure: true },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function tallyTable(t: FuzzTally, seed: number): string {
  const rows: Array<[string, string]> = [
    ['seed', String(seed)],
    ['imports', String(t.imports)],
    ['lines', String(t.lines)],
    ['rows (records loaded)', String(t.rows)],
    ['blank lines', String(t.blank)],
    ['quarantined', String([...t.byCode.values()].reduce((a, b) => a + b, 0))],
    ...[...t.byCode.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]): [string, string] => [`  ${k}`, String(v)]),
    ['failed loads', String(t.failedLoads)],
    ['held, then seen again', String(t.heldSeen.checks)],
    ...[...t.heldSeen.byLater.entries()].map(([k, v]): [string, string] => [`  later load ${k}`, String(v)]),
    ['  ids held', String(t.heldSeen.held)],
    ['  of them seen again', String(t.heldSeen.seenAgain)],
    ['  deleted by apply', String(t.heldSeen.deletedByApply)],
  ];
  const w = Math.max(...rows.map((r) => r[0].length));
  return rows.map(([k, v]) => `${k.padEnd(w)}  ${v.padStart(8)}`).join('\n');
}
