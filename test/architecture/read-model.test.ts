import path from 'node:path';
import {
  isIdentifier,
  isImportDeclaration,
  isNoSubstitutionTemplateLiteral,
  isPropertyAccessExpression,
  isStringLiteral,
  isTemplateExpression,
  type Node,
} from 'typescript/unstable/ast';
import { describe, expect, it } from 'vitest';
import { importsTypesOnly, type ParsedFile, withSourceFiles } from '../../scripts/lib/source-ast.ts';

/**
 * The read model's rule (src/warehouse/README.md, "The read model"): the warehouse's shape is
 * known in src/warehouse alone. The layers that show or write figures for people, src/dashboard,
 * src/cli, src/demo and src/enrich, the loader (src/ingest, whose statements are
 * src/warehouse/load/'s, hot path included) and the alert checks (src/alerts) hold no SQL:
 *
 * - no string or template literal that reads as a SQL statement (select … from, a select of a
 *   function, insert into, update … set, delete from, a transaction or savepoint, set local,
 *   create or drop …, copy … from stdin, analyze, a common table expression, an advisory lock);
 * - no call of kysely's query builder (selectFrom, insertInto, updateTable, deleteFrom, …) nor
 *   `executeQuery`;
 * - no import of `pg`, `pg-copy-streams` or `kysely` but of their types (a pool, a client or a
 *   `Kysely<Database>` is passed through, never queried); kysely's `sql` among them.
 *
 * The one exception is text printed for a person to run (`ALLOWED`), not run by crs-sync.
 *
 * And src/dashboard reaches the warehouse through the read model (src/warehouse/read/) only, but
 * for db-errors.ts (what kind of failure an error is, for the page's words); outside src/warehouse
 * the read model is imported through its face, read/index.ts, never one of its modules.
 */
const NO_SQL_DIRS = ['src/dashboard', 'src/cli', 'src/demo', 'src/enrich', 'src/ingest', 'src/alerts'];

const SQL_STATEMENT: RegExp[] = [
  /\bselect\b[\s\S]*\bfrom\s+[a-z_]/i,
  /\binsert\s+into\b/i,
  /\bupdate\s+[a-z_"]+(\s+[a-z_]+)?\s+set\b/i,
  /\bdelete\s+from\b/i,
  /\b(begin|start)\s+transaction\b/i,
  /\b(savepoint|rollback)\b/i,
  /\bset\s+local\b/i,
  /\b(create|drop)\s+(temp(orary)?\s+|unlogged\s+)?(table|index|view|function|schema)\b/i,
  // A literal that is one statement with no `from`: a transaction's edge, a select of a function.
  /^\s*(begin|commit)\s*(;|$)/i,
  /^\s*select\s+[a-z_]+\s*\(/i,
  /^\s*(analyze|vacuum)\b/i,
  /\bcopy\s+[a-z_"]+\s*(\([^)]*\))?\s*(from|to)\s+(stdin|stdout)\b/i,
  /\bwith\s+(recursive\s+)?[a-z_]+\s*(\([^)]*\))?\s+as\s*\(/i,
  /\bpg_(try_)?advisory_(xact_)?(un)?lock/i,
];
const QUERY_BUILDER = new Set([
  'selectFrom',
  'insertInto',
  'updateTable',
  'deleteFrom',
  'mergeInto',
  'replaceInto',
  'executeQuery',
]);
const DB_MODULES = new Set(['pg', 'pg-copy-streams', 'kysely']);

/** SQL that crs-sync prints, never runs: file and the start of the literal. */
const ALLOWED: { file: string; starts: string; why: string }[] = [
  {
    file: 'src/demo/run-demo.ts',
    starts: '  psql ',
    why: 'the psql command line the demo prints for the user',
  },
];

/** Whether the text of a literal reads as a SQL statement. */
function readsAsSql(text: string): boolean {
  return SQL_STATEMENT.some((re) => re.test(text));
}

/** What in a file breaks the rule, one line each: `path:line what`. */
function sqlIn(file: ParsedFile): string[] {
  const found: string[] = [];
  const at = (node: Node, what: string) => found.push(`${file.path}:${file.lineOf(node.pos + 1)} ${what}`);
  const visit = (node: Node): void => {
    if (isImportDeclaration(node) && isStringLiteral(node.moduleSpecifier)) {
      const from = node.moduleSpecifier.text;
      const typeOnly = importsTypesOnly(node);
      if (DB_MODULES.has(from) && !typeOnly) at(node, `imports ${from} at run time`);
      return;
    }
    const allowed = (text: string) => ALLOWED.some((a) => a.file === file.path && text.startsWith(a.starts));
    if (isStringLiteral(node) || isNoSubstitutionTemplateLiteral(node)) {
      if (readsAsSql(node.text) && !allowed(node.text))
        at(node, `SQL in a literal: ${JSON.stringify(node.text.slice(0, 60))}`);
    } else if (isTemplateExpression(node)) {
      const text = [node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join(' ? ');
      if (readsAsSql(text) && !allowed(text))
        at(node, `SQL in a template: ${JSON.stringify(text.slice(0, 60))}`);
    } else if (
      isPropertyAccessExpression(node) &&
      isIdentifier(node.name) &&
      QUERY_BUILDER.has(node.name.text)
    ) {
      at(node, `kysely query builder: .${node.name.text}`);
    }
    node.forEachChild(visit);
  };
  file.sf.forEachChild(visit);
  return found;
}

/** The warehouse modules a file imports (relative imports into src/warehouse). */
function warehouseImports(file: ParsedFile): string[] {
  const out: string[] = [];
  const visit = (node: Node): void => {
    if (isImportDeclaration(node) && isStringLiteral(node.moduleSpecifier)) {
      const spec = node.moduleSpecifier.text;
      if (spec.startsWith('.')) {
        const to = path.posix.normalize(path.posix.join(path.posix.dirname(file.path), spec));
        if (to.startsWith('src/warehouse/')) out.push(to);
      }
    }
    node.forEachChild(visit);
  };
  file.sf.forEachChild(visit);
  return out;
}

const ROOT = path.resolve(import.meta.dirname, '../..');
const { checked, violations, dashboardReach, pastReadIndex } = withSourceFiles(ROOT, (parsed) => {
  const scope = parsed.filter((f) => NO_SQL_DIRS.some((d) => f.path.startsWith(`${d}/`)));
  return {
    checked: scope.map((f) => f.path),
    violations: scope.flatMap(sqlIn),
    dashboardReach: parsed
      .filter((f) => f.path.startsWith('src/dashboard/'))
      .flatMap((f) =>
        warehouseImports(f)
          .filter((to) => !to.startsWith('src/warehouse/read/') && to !== 'src/warehouse/db-errors.ts')
          .map((to) => `${f.path} imports ${to}`),
      ),
    pastReadIndex: parsed
      .filter((f) => !f.path.startsWith('src/warehouse/'))
      .flatMap((f) =>
        warehouseImports(f)
          .filter((to) => to.startsWith('src/warehouse/read/') && to !== 'src/warehouse/read/index.ts')
          .map((to) => `${f.path} imports ${to}`),
      ),
  };
});

describe('the warehouse holds the SQL that people read, the loader and the enrichment write, the alerts check', () => {
  it('when the dashboard, the CLI, the demo, the enrichment, the loader and the alerts are read, then none holds SQL, a query builder call or a run-time pg/kysely import', () => {
    // The rule itself: guards against patterns that accept everything or nothing.
    for (const stmt of [
      `select count(*) from sync_days where status = $1`,
      `insert into threads (thread_id) values ($1)`,
      `update threads t set enrich_status = 'pending'`,
      `delete from held_deletes where day = $1`,
      'begin transaction isolation level repeatable read, read only',
      'savepoint s1',
      `set local statement_timeout = 100`,
      'begin',
      'commit',
      'begin; set local crs_sync.marks_wait_day = ...',
      'select pg_try_advisory_lock(hashtext($1)) as ok',
      'analyze load_seen',
      'drop table if exists crs_gone',
      'create temp table crs_gone as select 1',
      'copy load_seen (load_key, message_id) from stdin (format binary)',
      'with recursive k(load_key) as (select 1)',
    ]) {
      expect(readsAsSql(stmt), stmt).toBe(true);
    }
    for (const prose of [
      'recompute the rollups from the raw tables (all of them, or the days of a range)',
      'print JSON',
      'the dashboard is read-only: GET and HEAD only',
      'deletes the guard held: list and apply',
      'end',
      'begin the load again',
      'commit and checkpoint together',
      'a copy of the export from the service',
      'select a day',
    ]) {
      expect(readsAsSql(prose), prose).toBe(false);
    }
    expect(checked.length).toBeGreaterThan(60);
    expect(checked).toEqual(
      expect.arrayContaining([
        'src/ingest/merge/merge.ts',
        'src/ingest/finalize/finalize.ts',
        'src/alerts/checks.ts',
      ]),
    );
    expect(violations).toEqual([]);
  });

  it('when the dashboard imports from the warehouse, then it imports the read model only', () => {
    expect(dashboardReach).toEqual([]);
  });

  it('when code outside the warehouse imports the read model, then it imports read/index.ts', () => {
    expect(pastReadIndex).toEqual([]);
  });
});
