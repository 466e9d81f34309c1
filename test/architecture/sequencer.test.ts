import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TestSpecification, Vitest } from 'vitest/node';
import { SYSTEM_FIRST, SystemFirstSequencer } from '../setup/sequencer.ts';
import { SYSTEM } from '../tiers.ts';

const root = path.resolve(import.meta.dirname, '..', '..');

/** The system files as vitest hands them to a sequencer: no cached results (a fresh clone). */
function specs(): TestSpecification[] {
  const project = { name: 'system', config: { sequence: { groupOrder: 1 }, isolate: true } };
  return SYSTEM.map((p) => ({ moduleId: path.join(root, p), project }) as unknown as TestSpecification);
}

describe('the system tier starts with the files that share the CPU best (test/setup/sequencer.ts)', () => {
  it('when vitest has no results to sort by, then SYSTEM_FIRST come first in their order, and every file comes once', async () => {
    const ctx = {
      cache: { getTestSpecificationResult: () => undefined },
      config: { root },
    } as unknown as Vitest;
    const sorted = (await new SystemFirstSequencer(ctx).sort(specs())).map((s) =>
      path.relative(root, s.moduleId),
    );
    expect(sorted.slice(0, SYSTEM_FIRST.length)).toEqual(SYSTEM_FIRST);
    expect([...sorted].sort()).toEqual([...SYSTEM].sort());
    for (const p of SYSTEM_FIRST) expect(SYSTEM).toContain(p);
  });
});
