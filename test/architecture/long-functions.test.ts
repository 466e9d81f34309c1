import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withSourceFiles } from '../../scripts/lib/source-ast.ts';
import { longFunctions } from '../../scripts/long-functions.ts';

const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n');

describe('scripts/long-functions.ts', () => {
  let root = '';
  beforeAll(async () => {
    root = mkdtempSync(path.join(tmpdir(), 'crs-long-functions-'));
    await mkdir(path.join(root, 'src'));
    writeFileSync(path.join(root, 'tsconfig.json'), JSON.stringify({ include: ['src'] }));
    writeFileSync(
      path.join(root, 'src/a.ts'),
      [
        `export function short(): void {\n${body(10)}\n}`,
        `export function unexplained(): void {\n${body(85)}\n}`,
        `/**\n * Does a lot. Long: one table, read top to bottom.\n */\nexport function explained(): void {\n${body(90)}\n}`,
        `export const arrow = (): void => {\n${body(81)}\n};`,
        `export class Holder {\n  #hidden(): void {\n${body(83)}\n  }\n}`,
      ].join('\n\n'),
    );
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('when the project’s own source is checked, then every function over 80 lines says why (as CI checks)', () => {
    const repo = path.resolve(import.meta.dirname, '../..');
    const found = withSourceFiles(repo, (files) => longFunctions(files, 80));
    expect(found.length).toBeGreaterThan(10);
    expect(
      found.filter((f) => !f.why).map((f) => `${f.file}:${f.line} ${f.name} (${f.lines} lines)`),
    ).toEqual([]);
  });

  it('when functions are over the limit, then each is listed by name (a private method’s #name too) with its length and its reason if it gives one', () => {
    const found = withSourceFiles(root, (files) => longFunctions(files, 80));
    expect(found.map((f) => [f.name, f.lines, f.why])).toEqual([
      ['explained', 92, 'Long: one table, read top to bottom.'],
      ['unexplained', 87, undefined],
      ['#hidden', 85, undefined],
      ['arrow', 83, undefined],
    ]);
    expect(found.every((f) => f.file === 'src/a.ts')).toBe(true);
  });
});
