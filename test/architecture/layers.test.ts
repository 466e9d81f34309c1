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
import {
  importsTypesOnly,
  type ParsedFile,
  SOURCE_DIRS,
  withSourceFiles,
} from '../../scripts/lib/source-ast.ts';

/**
 * The layer rule of docs/architecture.md, checked on every import of every source file:
 *
 *   cli → demo/dashboard → temporal → workflows, activities → contract
 *     → enrich/ingest → api/simulator/alerts → warehouse/metrics → shared (src/common, errors, log, config)
 *
 * A file may import from its own layer or from a layer below it, never from one above, and no
 * chain of imports comes back to the file it started from.
 *
 * contract/ is a layer of its own: it declares what travels through Temporal's history (the
 * workflows' ids, inputs, results and progress; the activities' names, arguments and results;
 * the counts), so workflows and activities both speak it and never import each other (the worker
 * bundles workflow code, activities run outside it). It is bundled with the workflows, so it may
 * only import the domain's pure counts modules below it.
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
  { name: 'workflows', rank: 6, matches: under('workflows') },
  { name: 'activities', rank: 5, matches: under('activities') },
  { name: 'contract', rank: 4, matches: under('contract') },
  { name: 'enrich', rank: 3, matches: under('src/enrich') },
  { name: 'ingest', rank: 3, matches: under('src/ingest') },
  { name: 'api', rank: 2, matches: under('src/api') },
  { name: 'simulator', rank: 2, matches: under('src/simulator') },
  { name: 'alerts', rank: 2, matches: under('src/alerts') },
  { name: 'warehouse', rank: 1, matches: under('src/warehouse') },
  { name: 'metrics', rank: 1, matches: under('src/metrics') },
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
      add(node.moduleSpecifier, importsTypesOnly(node));
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

  it('when workflow code and activity code are read, then neither imports the other, not even a type', () => {
    const across = imports.filter(
      (i) =>
        (layerOf(i.from)?.name === 'workflows' && layerOf(i.to)?.name === 'activities') ||
        (layerOf(i.from)?.name === 'activities' && layerOf(i.to)?.name === 'workflows'),
    );
    expect(across.map((i) => `${i.from} imports ${i.to}${i.typeOnly ? ' (types)' : ''}`)).toEqual([]);
  });

  it('when the contract is read, then both sides speak it and it imports only itself and the pure counts and load target modules', () => {
    // Workflow code bundles the contract: an import of I/O code here would enter the sandbox.
    const PURE = ['src/common/counts.ts', 'src/common/load-target.ts', 'src/enrich/counts.ts'];
    expect(files.filter((f) => layerOf(f)?.name === 'contract')).toEqual(
      expect.arrayContaining(['contract/activities.ts', 'contract/counts.ts', 'contract/workflows.ts']),
    );
    const outside = imports.filter(
      (i) => layerOf(i.from)?.name === 'contract' && !i.to.startsWith('contract/') && !PURE.includes(i.to),
    );
    expect(outside.map((i) => `${i.from} imports ${i.to}`)).toEqual([]);
    const speakers = new Set(
      imports.filter((i) => i.to.startsWith('contract/')).map((i) => layerOf(i.from)?.name),
    );
    expect([...speakers]).toEqual(expect.arrayContaining(['workflows', 'activities']));
  });

  it('when enrichment is read, then it imports nothing of the export loader: what both use (the record limits) lives in src/common', () => {
    const intoIngest = imports.filter(
      (i) => layerOf(i.from)?.name === 'enrich' && layerOf(i.to)?.name === 'ingest',
    );
    expect(intoIngest.map((i) => `${i.from} imports ${i.to}`)).toEqual([]);
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
    expect(layerOf('src/enrich/index.ts')?.rank).toBeLessThan(layerOf('contract/workflows.ts')?.rank ?? -1);
    // Activities importing workflow code is upward, whatever the other rules say.
    expect(layerOf('activities/index.ts')?.rank).toBeLessThan(layerOf('workflows/index.ts')?.rank ?? -1);
    expect(layerOf('contract/counts.ts')?.rank).toBeLessThan(layerOf('activities/index.ts')?.rank ?? -1);
  });
});
