import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import config from '../../vitest.config.ts';
import { INTEGRATION, SYSTEM } from '../tiers.ts';

/**
 * test/tiers.ts puts each test file in one tier: unit by default, INTEGRATION and SYSTEM by
 * name. A listed path that no longer exists (a file renamed or deleted on another branch) would
 * silently move the new path to the unit tier, where the tier guard fails it; this test names it
 * first.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

function testFiles(): string[] {
  return readdirSync(path.join(ROOT, 'test'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => `test/${f.split(path.sep).join('/')}`)
    .sort();
}

interface Project {
  test?: { name?: string; include?: string[]; exclude?: string[] };
}

function project(name: string): { include: string[]; exclude: string[] } {
  const projects = (config.test?.projects ?? []) as Project[];
  const p = projects.find((x) => x.test?.name === name);
  if (!p?.test) throw new Error(`vitest.config.ts has no project ${name}`);
  return { include: p.test.include ?? [], exclude: p.test.exclude ?? [] };
}

describe('test tiers (test/tiers.ts)', () => {
  it('when the lists are read, then every path is a test file that exists, listed once, in order', () => {
    for (const [name, list] of [
      ['INTEGRATION', INTEGRATION],
      ['SYSTEM', SYSTEM],
    ] as const) {
      const missing = list.filter((f) => !f.endsWith('.test.ts') || !existsSync(path.join(ROOT, f)));
      expect(missing, `${name}: not a test file in the repository`).toEqual([]);
      expect([...list], `${name}: sorted, so that branches adding files merge cleanly`).toEqual(
        [...list].sort(),
      );
      expect(new Set(list).size, `${name}: a path listed twice`).toBe(list.length);
    }
    expect(
      INTEGRATION.filter((f) => SYSTEM.includes(f)),
      'in both lists',
    ).toEqual([]);
  });

  it('when vitest.config.ts builds the projects, then each test file on disk runs in exactly one tier', () => {
    const unit = project('unit');
    const integration = project('integration');
    const system = project('system');
    expect(unit.include).toEqual(['test/**/*.test.ts']);
    expect(integration.include).toEqual([...INTEGRATION]);
    expect(system.include).toEqual([...SYSTEM]);
    const tiers = testFiles().map((f) => {
      const in_ = [
        !unit.exclude.includes(f) && 'unit',
        integration.include.includes(f) && 'integration',
        system.include.includes(f) && 'system',
      ].filter(Boolean);
      return `${f}: ${in_.join(', ')}`;
    });
    expect(tiers.filter((t) => t.includes(',') || t.endsWith(': '))).toEqual([]);
    expect(tiers.length).toBeGreaterThan(100);
  });
});
