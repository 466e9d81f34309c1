import { describe, expect, it } from 'vitest';
import { quickMessageId } from '../../../src/ingest/merge/fast-path.ts';
import { dayOfRaw } from '../../../src/ingest/merge/pending.ts';
import { lineFields } from '../../../src/ingest/parse/line-fields.ts';
import { Rng } from '../../../src/simulator/prng.ts';
import { uuidFrom } from '../../helpers/export-lines.ts';
import { testSeed } from '../../helpers/seed.ts';
import { adversarialLine, disagreement, newReadingTally } from './line-reading-core.ts';

/**
 * Every reader that takes an id, a time or a day from a line's bytes agrees with JSON.parse of
 * the line, or says it cannot tell (line-reading-core.ts builds the lines). Seeded:
 * LINE_READING_SEED=… replays a run; `npm run fuzz:lines` runs a million lines and more.
 */
const SEED = testSeed(20261128, 'LINE_READING_SEED');
const LINES = 40_000;
const DAY = '2026-11-10';

const A = uuidFrom('reading:a');
const B = uuidFrom('reading:b');
const T = uuidFrom('reading:t');
const rest = `"Thread ID":"${T}","User ID":"${T}","Input":"q","Response":"r"`;

describe('one reading of a line (byte readers against JSON.parse)', () => {
  it('when a key is spelled with an escape, then the scanner, the quick id and the reject read the id JSON.parse reads', () => {
    const line = `{"Message ID":"${A}",${rest},"Message Time":"${DAY}T10:00:00","Message\\u0020ID":"${B}"}`;
    const bytes = Buffer.from(line);
    expect((JSON.parse(line) as Record<string, string>)['Message ID']).toBe(B);
    expect(lineFields(bytes).messageId).toBe(B);
    // The raw bytes cannot tell which key wins: the line is parsed up front.
    expect(quickMessageId(bytes)).toBeUndefined();
    const escapedTime = `{"Message ID":"${A}",${rest},"Message\\u0020Time":"${DAY}T10:00:00","Message Time":"2026-11-11T00:00:00Z","Message \\u0054ime":"${DAY}T11:00:00"}`;
    expect(dayOfRaw(escapedTime)).toBe(DAY);
    expect(lineFields(Buffer.from(escapedTime)).messageTime).toBe(`${DAY}T11:00:00`);
  });

  it('when the id itself is written with escapes, then the scanner decodes it as JSON.parse does', () => {
    const escaped = [...A].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
    const bytes = Buffer.from(`{"Message ID":"${escaped}",${rest},"Message Time":"${DAY}T10:00:00"}`);
    expect(lineFields(bytes).messageId).toBe(A);
  });

  it(`when ${LINES} adversarial lines are read (seed ${SEED}), then no reader names an id or a time JSON.parse does not`, () => {
    console.log(`line reading: seed ${SEED} (LINE_READING_SEED=${SEED} replays it)`);
    const rng = new Rng(SEED);
    const ids = Array.from({ length: 12 }, (_, i) => uuidFrom(`reading:${SEED}:${i}`));
    const tally = newReadingTally();
    const failures: string[] = [];
    for (let i = 0; i < LINES && failures.length < 5; i++) {
      const c = adversarialLine(rng, DAY, ids);
      const d = disagreement(c, rng, tally);
      if (d !== null)
        failures.push(`line ${i} (${c.note}): ${d}\n  ${c.bytes.toString('latin1').slice(0, 600)}`);
    }
    expect(failures).toEqual([]);
    // The generator reaches what it is for: records, JSON that is not one, and quick ids both ways.
    expect(tally.records).toBeGreaterThan(LINES / 20);
    expect(tally.json - tally.records).toBeGreaterThan(LINES / 20);
    expect(tally.quickIds).toBeGreaterThan(LINES / 20);
    expect(tally.quickUndecided).toBeGreaterThan(0);
  });
});
