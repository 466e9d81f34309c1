import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * docs/architecture.md's table of layers is the map of the source: every folder of `src/` (and the
 * Temporal folders at the top) must stand in its "folder" column, so that a new room is placed on
 * the map when it is built. That every path the doc names exists is docs-paths.test.ts's check.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

/** The folders the table of layers names in its second column, without a trailing slash. */
function tableFolders(): Set<string> {
  const doc = readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8');
  const out = new Set<string>();
  for (const line of doc.split('\n')) {
    const cells = line.split('|');
    if (cells.length < 4 || !line.startsWith('|')) continue;
    for (const m of (cells[2] ?? '').matchAll(/`([^`]+)`/g)) out.add(m[1]!.replace(/\/$/, ''));
  }
  return out;
}

describe('docs/architecture.md', () => {
  it('when the source has a folder, then the table of layers names it', () => {
    const named = tableFolders();
    const folders = [
      ...readdirSync(path.join(ROOT, 'src'), { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => `src/${d.name}`),
      'workflows',
      'activities',
      'contract',
    ];
    expect(folders.length).toBeGreaterThan(10);
    expect(folders.filter((f) => !named.has(f))).toEqual([]);
  });
});
