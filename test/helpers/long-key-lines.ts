import { createHash } from 'node:crypto';
import { type FakeRecord, makeRecords } from './export-lines.ts';

/**
 * Lines with keys no index can hold, for the tests that load them by import, by a day's HTTP pull
 * (test/ingest/long-keys.test.ts) and by a sync through Temporal (test/temporal/long-keys-sync.test.ts).
 */
/** `bytes` of ASCII that no compression shrinks much (hex of a sha256 chain), as a real key would not repeat. */
export function noise(bytes: number, label: string): string {
  let out = '';
  let h = label;
  while (out.length < bytes) {
    h = createHash('sha256').update(h).digest('hex');
    out += h;
  }
  return out.slice(0, bytes);
}

/** The source text of `rec` with `tail` (more keys) added. */
export const withExtra = (rec: object, tail: string) => `${JSON.stringify(rec).slice(0, -1)},${tail}}`;
export const manyKeys = (count: number) => Array.from({ length: count }, (_, i) => `"k${i}":0`).join(',');

export const DAY = '2026-11-12';
export const MEGA_KEY = noise(1 << 20, 'mega');
export const TEN_K_KEY = noise(10_000, 'ten-k');
export const CJK_KEY = Array.from({ length: 1024 }, (_, i) =>
  String.fromCodePoint(0x4e00 + ((i * 37) % 20_000)),
).join('');
/** Over the stored-key bound (512 bytes) but within the key limit (1,024 bytes): loads. */
export const KEY_600 = noise(600, 'six-hundred');

/**
 * A day of 16 records: 8 plain, and 8 lines with long keys or many keys, each also carrying a
 * new field `Region`, which counts as drift only where the line loads.
 */
export function day(): { lines: string[]; recs: FakeRecord[] } {
  const recs = makeRecords(16, { day: DAY, seed: 'long-keys' });
  const r = (i: number) => ({ ...recs[i], Region: 'eu' });
  const lines = [
    ...recs.slice(0, 8).map((x) => JSON.stringify(x)),
    withExtra(r(8), `"${MEGA_KEY}":1`), // key_too_long
    withExtra(r(9), `"${TEN_K_KEY}":1`), // key_too_long
    withExtra(r(10), `"${CJK_KEY}":1`), // key_too_long: 1,024 characters, 3,072 bytes
    withExtra(r(11), `"nested":{"${MEGA_KEY}":1}`), // key_too_long, nested
    withExtra(r(12), manyKeys(10_001)), // too_many_keys
    withExtra(recs[13]!, manyKeys(10_000)), // 10,000 new fields: loads (evolve)
    withExtra(r(14), `"${KEY_600}":1`), // loads, drift path bounded
    withExtra({ ...r(15), 'Message ID': 'not-a-uuid' }, '"x":1'), // invalid_uuid
  ];
  return { lines, recs };
}

export const EXPECTED_REJECTS = [
  [9, 'key_too_long'],
  [10, 'key_too_long'],
  [11, 'key_too_long'],
  [12, 'key_too_long'],
  [13, 'too_many_keys'],
  [16, 'invalid_uuid'],
];
