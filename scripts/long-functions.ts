/**
 * Lists the source functions (src, workflows, activities) longer than a limit, 80 lines unless
 * `--max N` says otherwise, longest first: `path:line  name  N lines  [why: …]`. The project's
 * rule: no function over 80 lines without a comment saying why. Such a comment is the function's
 * leading comment (or that of the statement declaring it) with a sentence starting "Long:" or
 * containing "is long because"; the script shows it as `why`.
 * `--check` exits 1 when a long function has no such comment.
 *
 *   node scripts/long-functions.ts [--max 80] [--check]
 */
import path from 'node:path';
import {
  getTokenPosOfNode,
  isArrowFunction,
  isFunctionDeclaration,
  isFunctionExpression,
  isIdentifier,
  isMethodDeclaration,
  isPrivateIdentifier,
  isPropertyAssignment,
  isVariableDeclaration,
  isVariableStatement,
  type Node,
  SyntaxKind,
} from 'typescript/unstable/ast';
import { type ParsedFile, withSourceFiles } from './lib/source-ast.ts';

export interface LongFunction {
  file: string;
  line: number;
  name: string;
  lines: number;
  why: string | undefined;
}

const WHY = /(?:^|[\s*/])(Long:[^\n]*|[^\n.]*\bis long because[^\n]*)/;

function isFunctionLike(n: Node): boolean {
  return (
    isFunctionDeclaration(n) ||
    isMethodDeclaration(n) ||
    isArrowFunction(n) ||
    isFunctionExpression(n) ||
    n.kind === SyntaxKind.Constructor ||
    n.kind === SyntaxKind.GetAccessor ||
    n.kind === SyntaxKind.SetAccessor
  );
}

function nameOf(n: Node): string {
  const named = n as { name?: Node };
  if (named.name && (isIdentifier(named.name) || isPrivateIdentifier(named.name))) return named.name.text;
  if (n.kind === SyntaxKind.Constructor) return 'constructor';
  const p = n.parent;
  if (p && (isVariableDeclaration(p) || isPropertyAssignment(p)) && isIdentifier(p.name)) return p.name.text;
  return '<anonymous>';
}

/** The node whose leading comment documents the function: its declaring statement for `const f = () => …`. */
function documentedNode(n: Node): Node {
  let d: Node = n;
  if (d.parent && isVariableDeclaration(d.parent)) {
    d = d.parent;
    while (d.parent && !isVariableStatement(d)) d = d.parent;
  }
  return d;
}

export function longFunctions(files: ParsedFile[], max: number): LongFunction[] {
  const out: LongFunction[] = [];
  for (const f of files) {
    const visit = (n: Node): void => {
      if (isFunctionLike(n)) {
        const start = getTokenPosOfNode(n, f.sf);
        const lines = f.lineOf(n.end - 1) - f.lineOf(start) + 1;
        if (lines > max) {
          const doc = documentedNode(n);
          // Everything between the previous token and the declaration: its comments and JSDoc.
          const leading = f.sf.text.slice(doc.pos, getTokenPosOfNode(doc, f.sf));
          const why = WHY.exec(leading)?.[1];
          const reason = why?.replace(/\s*\*\/\s*$/, '').trim();
          out.push({ file: f.path, line: f.lineOf(start), name: nameOf(n), lines, why: reason });
        }
      }
      n.forEachChild(visit);
    };
    f.sf.forEachChild(visit);
  }
  return out.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file));
}

function main(argv: string[]): number {
  const maxAt = argv.indexOf('--max');
  const max = maxAt >= 0 ? Number(argv[maxAt + 1]) : 80;
  if (!Number.isInteger(max) || max < 1) {
    process.stderr.write('usage: node scripts/long-functions.ts [--max N] [--check]\n');
    return 2;
  }
  const root = path.resolve(import.meta.dirname, '..');
  const found = withSourceFiles(root, (files) => longFunctions(files, max));
  for (const l of found) {
    process.stdout.write(
      `${l.file}:${l.line}  ${l.name}  ${l.lines} lines${l.why ? `  [why: ${l.why}]` : ''}\n`,
    );
  }
  const unexplained = found.filter((l) => !l.why).length;
  process.stdout.write(`${found.length} function(s) over ${max} lines, ${unexplained} without a why\n`);
  return argv.includes('--check') && unexplained > 0 ? 1 : 0;
}

if (import.meta.main) process.exitCode = main(process.argv.slice(2));
