import path from 'node:path';
import {
  isCallExpression,
  isExportDeclaration,
  isImportDeclaration,
  isImportTypeNode,
  isLiteralTypeNode,
  isNamedImports,
  isStringLiteral,
  type Node,
  SyntaxKind,
} from 'typescript/unstable/ast';
import { describe, expect, it } from 'vitest';
import { type ParsedFile, SOURCE_DIRS, withSourceFiles } from '../../scripts/lib/source-ast.ts';

/**
 * The layer rule of docs/architecture.md, checked on every import of every source file:
 *
 *   cli → demo/dashboard → temporal → workflows ⇢ activities → workflows/types.ts
 *     → enrich/ingest → api/simulator → warehouse → shared (src/common, errors, log, config)
 *
 * A file may import from its own layer or from a layer below it, never from one above; workflows
 * import activities as types only (the worker bundles workflow code, activities run outside it);
 * and no chain of imports comes back to the file it started from.
 *
 * workflows/types.ts is a layer of its own: it declares what travels through Temporal's history
 * (the activities' arguments and results, the runs' progress), so both workflows and activities
 * speak it, and it may only import the domain's own types below it.
 */
interface Layer {
  name: string;
  rank: number;
  matches: (file: string) => boolean;
}

const under = (dir: string) => (f: string) => f.startsWith(`${dir}/`);

/** Highest rank first; the first layer whose test matches a file is its layer. */
const LAYERS: Layer[] = [
  { name: 'cli', rank: 9, matches: under('src/cli') },
  { name: 'demo', rank: 8, matches: under('src/demo') },
  { name: 'dashboard', rank: 8, matches: under('src/dashboard') },
  { name: 'temporal', rank: 7, matches: under('src/temporal') },
  { name: 'history contract', rank: 4, matches: (f) => f === 'workflows/types.ts' },
  { name: 'workflows', rank: 6, matches: under('workflows') },
  { name: 'activities', rank: 5, matches: under('activities') },
  { name: 'enrich', rank: 3, matches: under('src/enrich') },
  { name: 'ingest', rank: 3, matches: under('src/ingest') },
  { name: 'api', rank: 2, matches: under('src/api') },
  { name: 'simulator', rank: 2, matches: under('src/simulator') },
  { name: 'warehouse', rank: 1, matches: under('src/warehouse') },
  {
    name: 'common',
    rank: 0,
    matches: (f) => under('src/common')(f) || ['src/errors.ts', 'src/log.ts', 'src/config.ts'].includes(f),
  },
];

function layerOf(file: string): Layer | undefined {
  return LAYERS.find((l) => l.matches(file));
}

interface Import {
  from: string;
  to: string;
  typeOnly: boolean;
}

/** Every relative import of a file (import, export … from, import(), import types), as a repository path. */
function importsOf(file: ParsedFile): Import[] {
  const found: Import[] = [];
  const add = (spec: Node | undefined, typeOnly: boolean) => {
    if (!spec || !isStringLiteral(spec) || !spec.text.startsWith('.')) return;
    const to = path.posix.normalize(path.posix.join(path.posix.dirname(file.path), spec.text));
    found.push({ from: file.path, to, typeOnly });
  };
  const visit = (node: Node): void => {
    if (isImportDeclaration(node)) {
      const c = node.importClause;
      const bindings = c?.namedBindings;
      const allTypes =
        c !== undefined &&
        (c.phaseModifier === SyntaxKind.TypeKeyword ||
          (c.name === undefined &&
            bindings !== undefined &&
            isNamedImports(bindings) &&
            bindings.elements.length > 0 &&
            bindings.elements.every((e) => e.isTypeOnly)));
      add(node.moduleSpecifier, allTypes);
    } else if (isExportDeclaration(node)) {
      add(node.moduleSpecifier, node.isTypeOnly);
    } else if (isCallExpression(node) && node.expression.kind === SyntaxKind.ImportKeyword) {
      add(node.arguments[0], false);
    } else if (isImportTypeNode(node) && isLiteralTypeNode(node.argument)) {
      add(node.argument.literal, true);
    }
    node.forEachChild(visit);
  };
  file.sf.forEachChild(visit);
  return found;
}

const ROOT = path.resolve(import.meta.dirname, '../..');
const { files, imports } = withSourceFiles(ROOT, (parsed) => ({
  files: parsed.map((f) => f.path),
  imports: parsed.flatMap(importsOf).filter((i) => SOURCE_DIRS.some((d) => i.to.startsWith(`${d}/`))),
}));

describe('the layers of the source tree', () => {
  it('when the source files are listed, then each belongs to a layer', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(imports.length).toBeGreaterThan(200);
    expect(files.filter((f) => layerOf(f) === undefined)).toEqual([]);
  });

  it('when every import is read, then none reaches into a layer above its own', () => {
    const upward = imports.flatMap((i) => {
      const a = layerOf(i.from);
      const b = layerOf(i.to);
      if (!a || !b || b.rank <= a.rank) return [];
      return [`${i.from} (${a.name}) imports ${i.to} (${b.name})`];
    });
    expect(upward).toEqual([]);
  });

  it('when workflow code imports activities, then it imports their types only', () => {
    const runtime = imports.filter(
      (i) => layerOf(i.from)?.name === 'workflows' && i.to.startsWith('activities/') && !i.typeOnly,
    );
    expect(runtime.map((i) => `${i.from} imports ${i.to} at run time`)).toEqual([]);
  });

  it('when the imports are followed file to file, then no chain comes back to where it started', () => {
    const edges = new Map<string, string[]>();
    for (const i of imports) edges.set(i.from, [...(edges.get(i.from) ?? []), i.to]);
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const stack: string[] = [];
    const visit = (f: string) => {
      state.set(f, 'open');
      stack.push(f);
      for (const to of edges.get(f) ?? []) {
        const s = state.get(to);
        if (s === 'open') cycles.push([...stack.slice(stack.indexOf(to)), to].join(' → '));
        else if (s === undefined) visit(to);
      }
      stack.pop();
      state.set(f, 'done');
    };
    for (const f of files) if (!state.has(f)) visit(f);
    expect(cycles).toEqual([]);
  });

  it('when the rule is checked against an import from a layer above, then it is caught', () => {
    // The rule itself: an upward import must be reported (guards against a layer table that
    // accepts everything).
    const a = layerOf('src/warehouse/sync-window.ts');
    const b = layerOf('workflows/liveness.ts');
    expect(a && b && b.rank > a.rank).toBe(true);
    expect(layerOf('src/enrich/index.ts')?.rank).toBeLessThan(layerOf('workflows/types.ts')?.rank ?? -1);
  });
});
