import { isUtf8 } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { lineFields } from '../../src/ingest/parse/line-fields.ts';
import { type SourceLine, type SplitStats, splitLines } from '../../src/ingest/parse/line-splitter.ts';

async function* chunksOf(parts: Uint8Array[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield p;
}

/** A line as the tests compare it: its bytes decoded at once ('' for a line with a problem). */
type TextLine = Omit<SourceLine, 'bytes'> & { text: string };

function textLine({ bytes, ...line }: SourceLine): TextLine {
  return { ...line, text: bytes === undefined ? '' : bytes.toString('utf8') };
}

async function collect(
  parts: Uint8Array[],
  maxLineBytes = 1024,
  maxPrefixBytes?: number,
  stats?: SplitStats,
) {
  const batches: TextLine[][] = [];
  const opts = maxPrefixBytes === undefined ? { maxLineBytes } : { maxLineBytes, maxPrefixBytes };
  for await (const batch of splitLines(chunksOf(parts), opts, stats)) {
    // `bytes` is a view valid only until the next array: check it against the text now, then drop it.
    batches.push(
      batch.map((line) => {
        if (line.bytes !== undefined) expect(isUtf8(line.bytes)).toBe(true);
        return textLine(line);
      }),
    );
  }
  return batches;
}

async function lines(input: Buffer, maxLineBytes = 1024, maxPrefixBytes?: number) {
  return (await collect([input], maxLineBytes, maxPrefixBytes)).flat();
}

/** Comparable form: Buffers as hex. */
function plain(ls: TextLine[]) {
  return ls.map((l) => ({ ...l, rawBytes: l.rawBytes?.toString('hex') }));
}

function splitAt(buf: Buffer, cuts: number[]): Buffer[] {
  const out: Buffer[] = [];
  let prev = 0;
  for (const c of [...cuts, buf.length]) {
    out.push(buf.subarray(prev, c));
    prev = c;
  }
  return out;
}

// A small deterministic PRNG (mulberry32) so a failing chunking can be reproduced.
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

describe('splitLines', () => {
  it('when lines end in LF or CRLF, then both endings are removed and line numbers count every physical line', async () => {
    const ls = await lines(Buffer.from('a\nbb\r\n\r\n\ncc\r\nd'));
    expect(ls.map((l) => [l.lineNo, l.text, l.byteLength])).toEqual([
      [1, 'a', 1],
      [2, 'bb', 2],
      [5, 'cc', 2],
      [6, 'd', 1],
    ]);
    expect(ls.every((l) => l.problem === undefined && l.rawBytes === undefined)).toBe(true);
  });

  it('when blank lines occur, then they are counted in stats but not yielded', async () => {
    const stats: SplitStats = { bytesRead: 0, linesSeen: 0, blankLines: 0 };
    const batches = await collect([Buffer.from('\n{"a":1}\n\r\n\n{"b":2}\n\n')], 1024, undefined, stats);
    expect(batches.flat().map((l) => l.lineNo)).toEqual([2, 5]);
    expect(stats).toMatchObject({ bytesRead: 21, linesSeen: 6, blankLines: 4 });
  });

  it('when lines hold only spaces, tabs or CRs, then they are counted as blank, not yielded (also across chunks and after a BOM)', async () => {
    const stats: SplitStats = { bytesRead: 0, linesSeen: 0, blankLines: 0 };
    const src = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from('  \t\n{"a":1}\n   \n\t\t\r\n \r \r\n x \n\u00a0\n   '),
    ]);
    // Cut inside the whitespace lines, so that some of them are carried from chunk to chunk.
    const batches = await collect(
      [src.subarray(0, 5), src.subarray(5, 16), src.subarray(16)],
      1024,
      undefined,
      stats,
    );
    const got = batches.flat().map((l) => ({ lineNo: l.lineNo, text: l.text }));
    expect(got).toEqual([
      { lineNo: 2, text: '{"a":1}' },
      { lineNo: 6, text: ' x ' },
      { lineNo: 7, text: '\u00a0' },
    ]);
    expect(stats).toMatchObject({ linesSeen: 8, blankLines: 5 });
  });

  it('when the last line has no LF, then it is yielded too', async () => {
    const ls = await lines(Buffer.from('x\ny'));
    expect(ls.map((l) => l.text)).toEqual(['x', 'y']);
  });

  it('when the last line ends in a lone CR, then the CR is removed', async () => {
    const ls = await lines(Buffer.from('x\ny\r'));
    expect(ls.map((l) => l.text)).toEqual(['x', 'y']);
  });

  it('when the source is empty, then nothing is yielded', async () => {
    expect(await collect([])).toEqual([]);
    expect(await collect([Buffer.alloc(0)])).toEqual([]);
  });

  it('when a chunk holds several lines, then they come as one array per chunk', async () => {
    const batches = await collect([Buffer.from('a\nb\nc'), Buffer.from('d\ne\n')]);
    expect(batches.map((b) => b.map((l) => l.text))).toEqual([
      ['a', 'b'],
      ['cd', 'e'],
    ]);
  });

  it('when line 1 starts with a UTF-8 BOM, then the BOM is not part of the text or byte length', async () => {
    const ls = await lines(Buffer.concat([BOM, Buffer.from('{"a":1}\r\n'), BOM, Buffer.from('x\n')]));
    expect(ls[0]).toEqual({ lineNo: 1, text: '{"a":1}', byteLength: 7 });
    // Only a BOM at the start of the source is special.
    expect(ls[1]).toEqual({ lineNo: 2, text: '\ufeffx', byteLength: 4 });
  });

  it('when the source is only a BOM and a line ending, then line 1 is blank', async () => {
    const stats: SplitStats = { bytesRead: 0, linesSeen: 0, blankLines: 0 };
    expect(await collect([Buffer.concat([BOM, Buffer.from('\n')])], 10, undefined, stats)).toEqual([]);
    expect(stats.blankLines).toBe(1);
  });

  it('when text is multi-byte UTF-8, then it is decoded and byteLength counts bytes', async () => {
    const ls = await lines(Buffer.from('é😀中\n'));
    expect(ls).toEqual([{ lineNo: 1, text: 'é😀中', byteLength: 9 }]);
  });

  it('when a line holds invalid UTF-8, then it is flagged with its exact bytes and its neighbours are intact', async () => {
    const bad = [
      Buffer.from([0x61, 0xff, 0x62]), // a byte never valid in UTF-8
      Buffer.from([0xc0, 0x80]), // an overlong NUL
      Buffer.from([0x7b, 0xe2, 0x82]), // a sequence cut short by the line end
      Buffer.from([0xed, 0xa0, 0x80]), // an encoded surrogate
    ];
    for (const b of bad) {
      const ls = await lines(Buffer.concat([Buffer.from('before\n'), b, Buffer.from('\r\nafter\n')]));
      expect(ls).toEqual([
        { lineNo: 1, text: 'before', byteLength: 6 },
        { lineNo: 2, text: '', byteLength: b.length, problem: 'invalid_utf8', rawBytes: b },
        { lineNo: 3, text: 'after', byteLength: 5 },
      ]);
    }
  });

  it('when a line holds a NUL byte, then it is flagged nul_byte with its exact bytes', async () => {
    const raw = Buffer.from('{"a":"x\u0000y"}');
    const ls = await lines(Buffer.concat([raw, Buffer.from('\nok')]));
    expect(ls).toEqual([
      { lineNo: 1, text: '', byteLength: raw.length, problem: 'nul_byte', rawBytes: raw },
      { lineNo: 2, text: 'ok', byteLength: 2 },
    ]);
  });

  it('when a line is exactly maxLineBytes (CR and BOM not counted), then it passes; one byte more, then it is too long', async () => {
    const ten = 'abcdefghij';
    const ls = await lines(Buffer.concat([BOM, Buffer.from(`${ten}\r\n${ten}\r\n${ten}k\r\n${ten}`)]), 10);
    expect(ls.map((l) => [l.text, l.problem, l.byteLength])).toEqual([
      [ten, undefined, 10],
      [ten, undefined, 10],
      ['', 'line_too_long', 11],
      [ten, undefined, 10],
    ]);
    expect(ls[2]!.rawBytes!.toString()).toBe(`${ten}k`);
  });

  it('when a 50 MB line meets a 1 MiB limit, then only a prefix is kept and the following lines are intact', async () => {
    const MiB = 1024 * 1024;
    const piece = Buffer.alloc(MiB, 0x78); // 'x'
    async function* source(): AsyncGenerator<Uint8Array> {
      yield Buffer.from('{"first":1}\n{"long":"');
      for (let i = 0; i < 50; i++) yield piece;
      yield Buffer.from('"}\r\n{"next":2}\n{"last":3}');
    }
    const stats: SplitStats = { bytesRead: 0, linesSeen: 0, blankLines: 0 };
    const out: TextLine[] = [];
    for await (const batch of splitLines(source(), { maxLineBytes: MiB }, stats))
      out.push(...batch.map(textLine));

    expect(out.map((l) => [l.lineNo, l.text, l.problem])).toEqual([
      [1, '{"first":1}', undefined],
      [2, '', 'line_too_long'],
      [3, '{"next":2}', undefined],
      [4, '{"last":3}', undefined],
    ]);
    const long = out[1]!;
    expect(long.byteLength).toBe(50 * MiB + 11);
    expect(long.rawBytes!.length).toBe(64 * 1024);
    expect(long.rawBytes!.subarray(0, 10).toString()).toBe('{"long":"x');
    // Never more than the limit (+ CR and BOM slack) was held for the line.
    expect(stats.peakLineBytes).toBeLessThanOrEqual(MiB + 4);
    expect(stats.bytesRead).toBe(50 * MiB + 21 + 25);
  });

  it('when a too-long line arrives in one chunk, then rawBytes is the first maxPrefixBytes bytes', async () => {
    const ls = await lines(Buffer.from(`${'y'.repeat(100)}\nz`), 20, 8);
    expect(ls[0]).toMatchObject({ lineNo: 1, problem: 'line_too_long', byteLength: 100, text: '' });
    expect(ls[0]!.rawBytes!.toString()).toBe('yyyyyyyy');
    expect(ls[1]).toEqual({ lineNo: 2, text: 'z', byteLength: 1 });
  });

  it('when a too-long line starts with a BOM, then the prefix excludes the BOM', async () => {
    const ls = await lines(Buffer.concat([BOM, Buffer.from('q'.repeat(30))]), 10, 5);
    expect(ls[0]).toMatchObject({ lineNo: 1, problem: 'line_too_long', byteLength: 30 });
    expect(ls[0]!.rawBytes!.toString()).toBe('qqqqq');
  });

  it('when a chunk is a Uint8Array view into a larger buffer, then only its own bytes are read', async () => {
    const backing = new TextEncoder().encode('IGNOREa\nb\nIGNORE');
    const view = new Uint8Array(backing.buffer, 6, 4);
    const ls = (await collect([view])).flat();
    expect(ls.map((l) => l.text)).toEqual(['a', 'b']);
  });

  it('when the source reuses its chunk buffer, then a carried partial line is not corrupted', async () => {
    const shared = Buffer.alloc(5);
    async function* source(): AsyncGenerator<Uint8Array> {
      for (const s of ['ab\ncd', 'ef\ngh']) {
        shared.write(s, 'latin1');
        yield shared;
      }
    }
    const out: string[] = [];
    for await (const batch of splitLines(source(), { maxLineBytes: 100 }))
      out.push(...batch.map((l) => textLine(l).text));
    expect(out).toEqual(['ab', 'cdef', 'gh']);
  });

  describe('chunk boundaries', () => {
    const input = Buffer.concat([
      BOM,
      Buffer.from('{"t":"é😀中"}\r\n'),
      Buffer.from('\r\n'),
      Buffer.from([0x41, 0xf0, 0x9f, 0x98, 0x0a]), // a 4-byte character cut short: invalid
      Buffer.from('naïve\r\n'),
      Buffer.from(`${'long😀'.repeat(10)}\r\n`), // 80 bytes: over the limit below
      Buffer.from('nul\u0000byte\n'),
      Buffer.from('\n\n'),
      Buffer.from('中文\r\n'),
      Buffer.from('last line, no LF 😀'),
    ]);
    const limit = 40;
    const prefix = 7;

    it('when the input is fed byte by byte, then the lines equal those of one chunk', async () => {
      const whole = plain(await lines(input, limit, prefix));
      expect(whole.map((l) => l.problem ?? l.text)).toEqual([
        '{"t":"é😀中"}',
        'invalid_utf8',
        'naïve',
        'line_too_long',
        'nul_byte',
        '中文',
        'last line, no LF 😀',
      ]);
      expect(whole.map((l) => l.lineNo)).toEqual([1, 3, 4, 5, 6, 9, 10]);
      const bytes = [...input].map((b) => Buffer.from([b]));
      expect(plain((await collect(bytes, limit, prefix)).flat())).toEqual(whole);
    });

    it('when the input is cut at every single position, then the lines equal those of one chunk', async () => {
      const whole = plain(await lines(input, limit, prefix));
      for (let c = 1; c < input.length; c++) {
        expect(plain((await collect(splitAt(input, [c]), limit, prefix)).flat())).toEqual(whole);
      }
    });

    it('when the input is cut into random chunkings, then the lines equal those of one chunk', async () => {
      const whole = plain(await lines(input, limit, prefix));
      const random = rng(20261122);
      for (let round = 0; round < 300; round++) {
        const cuts = new Set<number>();
        const n = 1 + Math.floor(random() * 12);
        for (let i = 0; i < n; i++) cuts.add(1 + Math.floor(random() * (input.length - 1)));
        const parts = splitAt(
          input,
          [...cuts].sort((a, b) => a - b),
        );
        expect(plain((await collect(parts, limit, prefix)).flat()), `cuts ${[...cuts]}`).toEqual(whole);
      }
    });
  });
});

describe('splitLines: the id and time of an over-long line', () => {
  const ID = '0F8FAD5B-D9CB-469F-A165-70867728950E';
  const id = ID.toLowerCase();
  const TIME = '2026-11-20T23:59:59.999+02:00';
  // The export's order: Input and Response first, then the ids and the time.
  const record = (input: string, tail = `"Message ID":"${ID}","Message Time":"${TIME}"`) =>
    `{"Input":"${input}","Response":"r",${tail},"Thread ID":"${ID}","User ID":"${ID}"}`;

  /** The one line of `text` (over maxLine 64, prefix 16), the input cut into chunks at `cuts`. */
  async function overLong(text: string, cuts: number[]) {
    const ls = (await collect(splitAt(Buffer.from(`${text}\n`), cuts), 64, 16)).flat();
    expect(ls).toHaveLength(1);
    expect(ls[0]).toMatchObject({ problem: 'line_too_long' });
    return ls[0]!;
  }

  it('when the Message ID lies beyond the kept prefix and is cut over two chunks at any byte, then the line still carries it, lower-cased, and its Message Time', async () => {
    const text = record('x'.repeat(200));
    const at = text.indexOf('"Message ID"');
    for (let cut = at - 1; cut <= at + 52; cut++) {
      const line = await overLong(text, [cut]);
      expect(line.rawBytes!.toString(), `cut ${cut}`).not.toContain('Message ID');
      expect([line.messageId, line.messageTime], `cut ${cut}`).toEqual([id, TIME]);
    }
  });

  it('when the line arrives in one chunk, or a byte per chunk, then the same id is read', async () => {
    const text = record('y'.repeat(300));
    expect((await overLong(text, [])).messageId).toBe(id);
    const everyByte = Array.from({ length: text.length }, (_, i) => i + 1);
    expect((await overLong(text, everyByte)).messageId).toBe(id);
  });

  it("when the key and a UUID appear inside a string value (Input, with escaped quotes) or in a nested object, then they are not taken for the line's id", async () => {
    const other = '11111111-2222-4333-8444-555555555555';
    const inText = record(`see \\"Message ID\\": \\"${other}\\" ${'z'.repeat(100)}`, '"Message Time":"x"');
    expect(JSON.parse(inText).Input).toContain(`"Message ID": "${other}"`);
    expect((await overLong(inText, [70, 71])).messageId).toBeNull();
    const nested = record('n'.repeat(100), `"meta":{"Message ID":"${other}","deeper":[{"a":"}"}]}`);
    expect((await overLong(nested, [90])).messageId).toBeNull();
    // The line's own id after both: only it is read.
    const both = record(
      `see \\"Message ID\\":\\"${other}\\" ${'z'.repeat(100)}`,
      `"meta":{"Message ID":"${other}"},"Message ID":"${ID}"`,
    );
    expect((await overLong(both, [64, 130])).messageId).toBe(id);
  });

  it('when escaped quotes and backslashes come before the key and JSON white space surrounds the colon, then the id is read', async () => {
    const text = `{"Input":"${'a\\\\'.repeat(20)}\\"${'q'.repeat(60)}\\\\" , \t"Message ID"\r :\t "${ID}" }`;
    expect(JSON.parse(text)['Message ID']).toBe(ID);
    for (const cut of [10, 41, 42, 100, 150]) expect((await overLong(text, [cut])).messageId).toBe(id);
  });

  it('when the line has no Message ID, or it is not a UUID, or the line is not a JSON object, then the id is null', async () => {
    expect((await overLong(record('w'.repeat(100), '"Message Time":"x"'), [50])).messageId).toBeNull();
    expect((await overLong(record('w'.repeat(100), '"Message ID":"abc"'), [50])).messageId).toBeNull();
    expect((await overLong(record('w'.repeat(100), `"Message ID":12`), [50])).messageId).toBeNull();
    expect((await overLong(`["Message ID","${ID}",${'1,'.repeat(60)}1]`, [50])).messageId).toBeNull();
    const none = await overLong('v'.repeat(100), [30]);
    expect([none.messageId, none.messageTime]).toEqual([null, null]);
  });
});

/** The obvious whole-buffer splitter, as the reference the streaming one must agree with. */
function reference(input: Buffer, maxLine: number, maxPrefix: number): TextLine[] {
  let buf = input;
  if (buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) buf = buf.subarray(3);
  const out: TextLine[] = [];
  let start = 0;
  let lineNo = 0;
  while (start < buf.length) {
    let end = buf.indexOf(10, start);
    const next = end === -1 ? buf.length : end + 1;
    if (end === -1) end = buf.length;
    lineNo++;
    let line = buf.subarray(start, end);
    if (line.length > 0 && line[line.length - 1] === 13) line = line.subarray(0, line.length - 1);
    start = next;
    if (line.length === 0) continue;
    if (line.length <= maxLine && /^[ \t\r]+$/.test(line.toString('latin1'))) continue;
    if (line.length > maxLine) {
      out.push({
        lineNo,
        text: '',
        byteLength: line.length,
        problem: 'line_too_long',
        rawBytes: Buffer.from(line.subarray(0, maxPrefix)),
        // Read from the whole line at once: the splitter must read the same streaming.
        ...lineFields(line),
      });
    } else if (!isUtf8(line)) {
      out.push({
        lineNo,
        text: '',
        byteLength: line.length,
        problem: 'invalid_utf8',
        rawBytes: Buffer.from(line),
      });
    } else if (line.includes(0)) {
      out.push({
        lineNo,
        text: '',
        byteLength: line.length,
        problem: 'nul_byte',
        rawBytes: Buffer.from(line),
      });
    } else {
      out.push({ lineNo, text: line.toString('utf8'), byteLength: line.length });
    }
  }
  return out;
}

describe('splitLines against a whole-buffer reference', () => {
  const atoms = [
    [0x0a],
    [0x0d, 0x0a],
    [0x0d],
    [0x00],
    [0xff],
    [0xef, 0xbb, 0xbf],
    [0xc3, 0xa9],
    [0xe4, 0xb8, 0xad],
    [0xf0, 0x9f, 0x98, 0x80],
    [0xf0, 0x9f],
    [0x61],
    [0x62],
    [0x7b],
    [0x22],
  ].map((a) => Buffer.from(a));

  it('when random inputs are cut into random chunks, then the lines equal the reference', async () => {
    const random = rng(7);
    for (let round = 0; round < 400; round++) {
      const parts: Buffer[] = [];
      const n = Math.floor(random() * 60);
      for (let i = 0; i < n; i++) {
        // Mostly plain letters, so that lines of every length around the limit occur.
        const a =
          random() < 0.6
            ? atoms[10 + Math.floor(random() * 4)]!
            : atoms[Math.floor(random() * atoms.length)]!;
        parts.push(a);
      }
      const input = Buffer.concat(parts);
      const maxLine = 1 + Math.floor(random() * 12);
      const maxPrefix = 1 + Math.floor(random() * 6);
      const cuts = new Set<number>();
      const k = Math.floor(random() * 8);
      for (let i = 0; i < k && input.length > 1; i++) cuts.add(1 + Math.floor(random() * (input.length - 1)));
      const chunks = splitAt(
        input,
        [...cuts].sort((x, y) => x - y),
      );
      const got = plain((await collect(chunks, maxLine, maxPrefix)).flat());
      expect(got, `input ${input.toString('hex')} max ${maxLine}/${maxPrefix} cuts ${[...cuts]}`).toEqual(
        plain(reference(input, maxLine, maxPrefix)),
      );
    }
  });
});
