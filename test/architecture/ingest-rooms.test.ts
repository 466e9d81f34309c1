import path from 'node:path';
import {
  isCallExpression,
  isExportDeclaration,
  isImportDeclaration,
  isImportTypeNode,
  isLiteralTypeNode,
  isStringLiteral,
  type Node,
  SyntaxKind,
} from 'typescript/unstable/ast';
import { describe, expect, it } from 'vitest';
import { type ParsedFile, withSourceFiles } from '../../scripts/lib/source-ast.ts';

/**
 * The loader's parse room (src/ingest/parse/: the line splitter, the field scanner, the record
 * parser, the record hash) turns bytes into lines and records and knows nothing of the database:
 * it can be read, tested and benchmarked without one, and the hot loops stay free of a client's
 * types. Held here:
 *
 * - no file of the room imports `pg`, `pg-copy-streams` or `kysely` (not even a type), nor any
 *   module of src/warehouse;
 * - nor does anything the room imports, followed through every relative import (src/common and
 *   the like), so a helper cannot carry the database in;
 * - the room imports nothing of the loader's other rooms (source/, merge/, finalize/), which do
 *   talk to the warehouse.
 */
const ROOM = 'src/ingest/parse/';
const DB_MODULES = /^(pg|pg-[\w-]+|kysely|@types\/pg)(\/|$)/;
const OTHER_ROOMS = ['src/ingest/source/', 'src/ingest/merge/', 'src/ingest/finalize/'];

/** Every import specifier of a file (import, export … from, import(), import types), relative ones resolved. */
function importsOf(file: ParsedFile): { spec: string; to: string | null }[] {
  const found: { spec: string; to: string | null }[] = [];
  const add = (spec: Node | undefined) => {
    if (!spec || !isStringLiteral(spec)) return;
    const to = spec.text.startsWith('.')
      ? path.posix.normalize(path.posix.join(path.posix.dirname(file.path), spec.text))
      : null;
    found.push({ spec: spec.text, to });
  };
  const visit = (node: Node): void => {
    if (isImportDeclaration(node) || isExportDeclaration(node)) add(node.moduleSpecifier);
    else if (isCallExpression(node) && node.expression.kind === SyntaxKind.ImportKeyword)
      add(node.arguments[0]);
    else if (isImportTypeNode(node) && isLiteralTypeNode(node.argument)) add(node.argument.literal);
    node.forEachChild(visit);
  };
  file.sf.forEachChild(visit);
  return found;
}

/** What reaches the database from a file, as chains `a → b → pg`: a file is reported once, by its shortest chain. */
function databaseReach(
  start: string[],
  importsOfFile: (file: string) => { spec: string; to: string | null }[],
): string[] {
  const found: string[] = [];
  const seen = new Set<string>(start);
  let frontier = start.map((f) => [f]);
  while (frontier.length > 0) {
    const next: string[][] = [];
    for (const chain of frontier) {
      const file = chain[chain.length - 1] as string;
      for (const i of importsOfFile(file)) {
        if (i.to === null) {
          if (DB_MODULES.test(i.spec)) found.push([...chain, i.spec].join(' → '));
        } else if (i.to.startsWith('src/warehouse/')) {
          found.push([...chain, i.to].join(' → '));
        } else if (!seen.has(i.to)) {
          seen.add(i.to);
          next.push([...chain, i.to]);
        }
      }
    }
    frontier = next;
  }
  return found;
}

const ROOT = path.resolve(import.meta.dirname, '../..');
const { room, reach, acrossRooms } = withSourceFiles(ROOT, (parsed) => {
  const byPath = new Map(parsed.map((f) => [f.path, f]));
  const imports = (file: string) => {
    const f = byPath.get(file);
    return f ? importsOf(f) : [];
  };
  const room = parsed.filter((f) => f.path.startsWith(ROOM)).map((f) => f.path);
  return {
    room,
    reach: databaseReach(room, imports),
    acrossRooms: room.flatMap((f) =>
      imports(f)
        .filter((i) => i.to !== null && OTHER_ROOMS.some((r) => i.to?.startsWith(r)))
        .map((i) => `${f} imports ${i.to}`),
    ),
  };
});

describe("the loader's parse room", () => {
  it('when its files and everything they import are read, then nothing reaches pg, kysely or src/warehouse', () => {
    // The check itself: a chain through a helper is found, a clean file is not.
    const fake: Record<string, { spec: string; to: string | null }[]> = {
      'src/ingest/parse/a.ts': [{ spec: '../../common/x.ts', to: 'src/common/x.ts' }],
      'src/common/x.ts': [{ spec: 'kysely', to: null }],
      'src/ingest/parse/b.ts': [{ spec: 'node:crypto', to: null }],
    };
    expect(databaseReach(['src/ingest/parse/a.ts', 'src/ingest/parse/b.ts'], (f) => fake[f] ?? [])).toEqual([
      'src/ingest/parse/a.ts → src/common/x.ts → kysely',
    ]);

    expect(room).toEqual(
      expect.arrayContaining([
        'src/ingest/parse/line-splitter.ts',
        'src/ingest/parse/line-fields.ts',
        'src/ingest/parse/record-parser.ts',
        'src/ingest/parse/record-hash.ts',
      ]),
    );
    expect(reach).toEqual([]);
  });

  it("when its imports are read, then none is of the loader's other rooms", () => {
    expect(acrossRooms).toEqual([]);
  });
});
