import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ByteSink, putMessageTuple } from '../../src/ingest/merge/copy-binary.ts';
import { FastPathGate } from '../../src/ingest/merge/fast-path.ts';
import { Partition } from '../../src/ingest/merge/partition.ts';
import { encodeText, lineReject, textReject } from '../../src/ingest/merge/pending.ts';
import { parseRecord } from '../../src/ingest/parse/record-parser.ts';

const LINE = JSON.stringify({
  'Message ID': '0f8fad5b-d9cb-469f-a165-70867728950e',
  'Thread ID': '7c9e6679-7425-40de-944b-e07fc1f90ae7',
  'User ID': '16fd2706-8baf-433b-82eb-8c7fada847da',
  'Message Time': '2026-11-20T23:30:00-02:00',
  Input: 'What changed?',
  Response: 'Revenue, mostly. Москва 📈',
});
const LINE_HASH = 'a'.repeat(40);

describe('FastPathGate (when the unparsed re-load path is tried)', () => {
  it('when fewer than half of 4000 fast-path lines were unchanged, then it closes until the probe line, then opens again', () => {
    const gate = new FastPathGate(1000);
    expect(gate.open(1)).toBe(true);
    gate.record(4000, 1999);
    expect(gate.open(10)).toBe(false); // judged here: the probe is at 10 + 1000
    expect(gate.open(1009)).toBe(false);
    expect(gate.open(1010)).toBe(true);
  });

  it('when at least half were unchanged, then it stays open', () => {
    const gate = new FastPathGate(1000);
    gate.record(4000, 2000);
    expect(gate.open(10)).toBe(true);
    expect(gate.open(11)).toBe(true);
  });
});

describe('Partition (the batch a key partition fills)', () => {
  // The batch logic never touches the connection.
  const client = {} as pg.PoolClient;

  it('when a batch reaches its first (staggered) limit, then it is full, and later batches close at the batch size', () => {
    const p = new Partition(0, client, 0, 2);
    expect(p.addRaw(1, LINE_HASH, 'id-1', Buffer.from('one'))).toBe(false);
    expect(p.addRaw(2, LINE_HASH, 'id-2', Buffer.from('two'))).toBe(true);
    const batch = p.close(3);
    expect(batch.rows.map((r) => r.lineNo)).toEqual([1, 2]);
    expect(
      p.addReject(textReject(3, { code: 'invalid_json', detail: 'x' }, '{', Buffer.from('{'), null)),
    ).toBe(false);
    expect(p.addRaw(4, LINE_HASH, 'id-4', Buffer.from('four'))).toBe(false);
    expect(p.addRaw(5, LINE_HASH, 'id-5', Buffer.from('five'))).toBe(true);
  });

  it('when a batch closes, then its sink goes with it and the next batch fills the spare; the one after reuses the first', () => {
    const p = new Partition(0, client, 0, 10);
    const first = p.sink;
    p.addRaw(1, LINE_HASH, 'id-1', Buffer.from('one'));
    const a = p.close(10);
    expect(a.sink).toBe(first);
    expect(a.sink.buf.toString('utf8', 0, a.sink.len)).toBe('one');
    expect(p.sink).not.toBe(first);
    expect(p.sink.len).toBe(0);
    p.addRaw(2, LINE_HASH, 'id-2', Buffer.from('two'));
    const b = p.close(10);
    expect(b.sink).not.toBe(first);
    expect(p.sink).toBe(first);
    expect(p.sink.len).toBe(0);
  });
});

describe('pending rows (one path from a line to its tuple)', () => {
  it('when a line is a record, then encodeText writes the tuple putMessageTuple writes and keeps its key fields', () => {
    const sink = new ByteSink(1024);
    const enc = encodeText(LINE, sink, 7, 'load-1', LINE_HASH);
    expect(enc.ok).toBe(true);
    if (!enc.ok) return;
    const parsed = parseRecord(LINE, { hash: false });
    if (!parsed.ok) throw new Error(parsed.detail);
    const ref = new ByteSink(1024);
    putMessageTuple(ref, parsed.record, 7, 'load-1', LINE_HASH);
    expect(sink.view(enc.row.at, enc.row.end)).toEqual(ref.view(0, ref.len));
    expect(enc.row).toMatchObject({
      kind: 'encoded',
      lineNo: 7,
      lineHash: LINE_HASH,
      messageId: '0f8fad5b-d9cb-469f-a165-70867728950e',
      threadId: '7c9e6679-7425-40de-944b-e07fc1f90ae7',
      userId: '16fd2706-8baf-433b-82eb-8c7fada847da',
      messageDate: '2026-11-21',
      // Taken as the tuple was encoded (the parse above left it unset, and putMessageTuple set it).
      recordHash: parsed.record.recordHash,
    });
  });

  it('when a line is not a record, then encodeText writes nothing and says why', () => {
    const sink = new ByteSink(1024);
    const enc = encodeText('{"Message ID": 1}', sink, 1, 'load-1', LINE_HASH);
    expect(enc.ok).toBe(false);
    expect(sink.len).toBe(0);
  });

  it('when a line holds a NUL byte, then its reject keeps the exact bytes and shows the NUL escaped', () => {
    const bytes = Buffer.from('{"a":"\u0000"}');
    const rej = lineReject({ lineNo: 3, byteLength: bytes.length, rawBytes: bytes }, 'nul_byte', 1000, null);
    expect(rej).toMatchObject({ lineNo: 3, code: 'text_not_storable', rawLength: bytes.length, day: null });
    expect(rej.raw).toBe('{"a":"\\u0000"}');
    expect(rej.rawBytes).toBe(bytes);
  });
});
