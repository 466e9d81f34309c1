import path from 'node:path';
import {
  computeLineStarts,
  type ImportDeclaration,
  isNamedImports,
  type SourceFile,
  SyntaxKind,
} from 'typescript/unstable/ast';
import { API } from 'typescript/unstable/sync';

/** The folders whose files are the connector's source (not tests, benches or migrations). */
export const SOURCE_DIRS = ['src', 'workflows', 'activities', 'contract'] as const;

export interface ParsedFile {
  /** Repository-relative, with forward slashes: `src/cli/follow.ts`. */
  path: string;
  sf: SourceFile;
  /** 1-based line of a character position. */
  lineOf(pos: number): number;
}

/**
 * The syntax trees of the source files, from the TypeScript compiler installed with the project
 * (its program for tsconfig.json, so the files are the ones `tsc -p .` reads). The compiler runs
 * as a child process while `fn` runs and is closed afterwards.
 */
export function withSourceFiles<T>(root: string, fn: (files: ParsedFile[]) => T): T {
  const api = new API({ cwd: root });
  try {
    const snapshot = api.updateSnapshot({ openProject: path.join(root, 'tsconfig.json') });
    const project = snapshot.getProjects()[0];
    if (!project) throw new Error(`no TypeScript project for ${root}/tsconfig.json`);
    const files: ParsedFile[] = [];
    for (const name of project.program.getSourceFileNames()) {
      const rel = path.relative(root, name).split(path.sep).join('/');
      if (!SOURCE_DIRS.some((d) => rel.startsWith(`${d}/`)) || rel.endsWith('.d.ts')) continue;
      const sf = project.program.getSourceFile(name);
      if (!sf) continue;
      const starts = computeLineStarts(sf.text);
      files.push({ path: rel, sf, lineOf: (pos) => lineAt(starts, pos) });
    }
    return fn(files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)));
  } finally {
    api.close();
  }
}

/** The 1-based line holding `pos`, by binary search over the line starts. */
function lineAt(starts: readonly number[], pos: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((starts[mid] ?? 0) <= pos) lo = mid;
    else hi = mid - 1;
  }
  return lo + 1;
}

/** Whether an import brings in types only (`import type …`, or every named binding `type`). */
export function importsTypesOnly(node: ImportDeclaration): boolean {
  const c = node.importClause;
  const bindings = c?.namedBindings;
  return (
    c !== undefined &&
    (c.phaseModifier === SyntaxKind.TypeKeyword ||
      (c.name === undefined &&
        bindings !== undefined &&
        isNamedImports(bindings) &&
        bindings.elements.length > 0 &&
        bindings.elements.every((e) => e.isTypeOnly)))
  );
}
