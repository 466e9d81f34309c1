import { existsSync, globSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The docs name files and folders of the repository; a rename or a removal must not leave them
 * pointing at nothing. From each doc below this test takes every reference into the repository:
 *
 * - a path from the top of the repository, in backticks or in plain text: a token that starts
 *   with one of `ROOTS` and a slash (`src/ingest/finalize/finalize.ts`, `workflows/`, `test/ingest/fuzz`,
 *   `./src/simulator/index.ts`), not preceded by a letter, `/`, `.`, `:`, `@` or `-` (so not a
 *   part of a URL, a package name or an absolute path); trailing punctuation is not part of it;
 * - the target of a Markdown link (`[text](decisions/)`, `![…](images/dashboard.png)`), resolved
 *   from the doc's folder; web addresses and anchors within the page are left out, an anchor
 *   after a path is dropped (the file is checked, not the heading);
 * - in a folder's README: the names in the first column of its `file` or `folder` tables, from
 *   the README's folder (or from the folder the section's heading names in backticks, as
 *   "The read model: `read/`"), and any other backticked relative path with a slash that ends
 *   in a file extension or a slash (`read/status.ts`, `rollups/`), from the README's folder.
 *
 * Each must exist on disk. A token with `*` is a glob pattern (`src/*\/README.md`): it must match
 * at least one path. Paths that only exist once something has run (`GENERATED`) are skipped.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

/** The docs read: the architecture first, then the project README, docs/ and every folder README. */
const DOCS = [
  'docs/architecture.md',
  'README.md',
  'docs/*.md',
  'src/**/README.md',
  'workflows/README.md',
  'activities/README.md',
  'contract/README.md',
  'test/README.md',
  'bench/README.md',
];

/** Top-level folders a path in the docs starts from. */
const ROOTS = [
  'src',
  'workflows',
  'activities',
  'contract',
  'migrations',
  'bench',
  'test',
  'docs',
  'scripts',
  'deploy',
  'bin',
  '.ci',
];

/** Made by running something (git-ignored), so absent from a fresh checkout. */
const GENERATED = ['bench/out', 'bench/.venv', 'test/dashboard/screenshots'];

const ROOTED = new RegExp(
  String.raw`(?<![\w./:@~$-])(?:\./)?((?:${ROOTS.map((r) => r.replace('.', '\\.')).join('|')})/[\w.\-/*]*)`,
  'g',
);
const LINK = /\]\(([^)\s]+)\)/g;
const BACKTICKED = /`([^`\n]+)`/g;
const RELATIVE = /^(?!\.?\/)[\w.-]+(?:\/[\w.-]+)*(?:\.(?:ts|js|md|json|ya?ml|css|py|sql)|\/)$/;
const BARE_NAME = /^[\w.-]+(?:\/[\w.-]+)*(?:\.[a-z]+|\/)$/;

interface Reference {
  doc: string;
  line: number;
  /** The path as written. */
  text: string;
  /** The repository path it points at. */
  target: string;
}

function trimPunctuation(token: string): string {
  return token.replace(/[.,:;]+$/, '');
}

function isRooted(token: string): boolean {
  return ROOTS.some((r) => token.startsWith(`${r}/`));
}

/** A README of a folder (not the project's README.md nor docs/): bare names in it are that folder's. */
function isFolderReadme(doc: string): boolean {
  return doc !== 'README.md' && !doc.startsWith('docs/') && path.posix.basename(doc) === 'README.md';
}

/** The first-column names of a `| file |` or `| folder |` table row, with the folder they are in. */
function tableNames(row: string, base: string): { text: string; target: string }[] {
  const first = row.split('|')[1] ?? '';
  return [...first.matchAll(BACKTICKED)]
    .map((m) => trimPunctuation(m[1] ?? ''))
    .filter((t) => BARE_NAME.test(t))
    .map((t) => ({ text: t, target: isRooted(t) ? t : path.posix.join(base, t) }));
}

/**
 * Every reference into the repository that a doc makes (see the comment at the top), in one pass
 * over its lines that keeps track of the table and the heading it is in.
 */
function referencesOf(doc: string, text: string): Reference[] {
  const dir = path.posix.dirname(doc);
  const folderReadme = isFolderReadme(doc);
  const found: Reference[] = [];
  let inFileTable = false;
  let headingFolder = dir;
  text.split('\n').forEach((line, i) => {
    const add = (t: string, target: string) =>
      found.push({ doc, line: i + 1, text: t, target: path.posix.normalize(target).replace(/\/$/, '') });
    for (const m of line.matchAll(ROOTED)) {
      const t = trimPunctuation(m[1] ?? '');
      add(t, t);
    }
    for (const m of line.matchAll(LINK)) {
      const t = (m[1] ?? '').replace(/#.*$/, '');
      if (t === '' || /^[a-z][a-z0-9+.-]*:/i.test(t) || t.startsWith('/')) continue;
      add(t, path.posix.join(dir, t));
    }
    if (!folderReadme) return;
    if (line.startsWith('#')) {
      const named = [...line.matchAll(BACKTICKED)].map((m) => m[1] ?? '').find((t) => /^[\w.-]+\/$/.test(t));
      headingFolder = named ? path.posix.join(dir, named) : dir;
    }
    const cells = line.split('|').map((c) => c.trim());
    if (line.startsWith('|') && /^(file|folder)$/.test(cells[1] ?? '')) {
      inFileTable = true;
      return;
    }
    if (!line.startsWith('|')) inFileTable = false;
    if (inFileTable && !/^\|[\s|:-]*$/.test(line)) {
      for (const n of tableNames(line, headingFolder)) add(n.text, n.target);
    }
    const firstCell = inFileTable ? (line.split('|')[1] ?? '') : '';
    for (const m of line.replace(firstCell, '').matchAll(BACKTICKED)) {
      const t = trimPunctuation(m[1] ?? '');
      if (!t.includes('/') || isRooted(t) || !RELATIVE.test(t)) continue;
      add(t, path.posix.join(dir, t));
    }
  });
  return found;
}

function exists(target: string): boolean {
  if (target.includes('*')) return globSync(target, { cwd: ROOT }).length > 0;
  return existsSync(path.join(ROOT, target));
}

function isGenerated(target: string): boolean {
  return GENERATED.some((g) => target === g || target.startsWith(`${g}/`));
}

function docFiles(): string[] {
  const files = DOCS.flatMap((d) => (d.includes('*') ? globSync(d, { cwd: ROOT }).sort() : [d]));
  return [...new Set(files)];
}

function missingIn(doc: string, text: string): string[] {
  return referencesOf(doc, text)
    .filter((r) => !isGenerated(r.target) && !exists(r.target))
    .map((r) => {
      const same = path.posix.normalize(r.text).replace(/\/$/, '') === r.target;
      return `${r.doc}:${r.line}: ${r.text}${same ? '' : ` (${r.target})`}`;
    });
}

describe('the paths the docs name', () => {
  const docs = docFiles();

  it('when the docs are listed, then each is there and names paths', () => {
    expect(docs.filter((d) => !existsSync(path.join(ROOT, d)))).toEqual([]);
    expect(docs).toEqual(
      expect.arrayContaining(['docs/architecture.md', 'src/ingest/README.md', 'test/README.md']),
    );
    const refs = referencesOf(
      'docs/architecture.md',
      readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8'),
    );
    expect(refs.length).toBeGreaterThan(50);
  });

  it('when a doc names a file, then the file exists', () => {
    const missing = docs.flatMap((d) => missingIn(d, readFileSync(path.join(ROOT, d), 'utf8')));
    expect(missing).toEqual([]);
  });

  it('when a doc names a file that is not there, then it is caught', () => {
    // The rule itself: a check that finds nothing missing must not be one that reads nothing.
    const doc = [
      'The loader is in `src/ingest/merge/load.ts`; see src/ingest/no-such-file.ts and `workflows/gone/`.',
      '[a link](decisions/0000-missing.md), [the web](https://example.com/src/x.ts), `/usr/src/x`.',
      'Globs: `src/*/README.md`, src/nothing/*.ts; made by a run: `bench/out/ingest.json`.',
      'Relative: `rollups/refresh.ts`, `read/nowhere.ts`.',
      '| file | holds |',
      '|---|---|',
      '| `finalize.ts`, `vanished.ts` | … |',
    ].join('\n');
    expect(missingIn('docs/example.md', doc)).toEqual([
      'docs/example.md:1: src/ingest/no-such-file.ts',
      'docs/example.md:1: workflows/gone/',
      'docs/example.md:2: decisions/0000-missing.md (docs/decisions/0000-missing.md)',
      'docs/example.md:3: src/nothing/*.ts',
    ]);
    expect(missingIn('src/warehouse/README.md', doc)).toEqual([
      'src/warehouse/README.md:1: src/ingest/no-such-file.ts',
      'src/warehouse/README.md:1: workflows/gone/',
      'src/warehouse/README.md:2: decisions/0000-missing.md (src/warehouse/decisions/0000-missing.md)',
      'src/warehouse/README.md:3: src/nothing/*.ts',
      'src/warehouse/README.md:4: read/nowhere.ts (src/warehouse/read/nowhere.ts)',
      'src/warehouse/README.md:7: finalize.ts (src/warehouse/finalize.ts)',
      'src/warehouse/README.md:7: vanished.ts (src/warehouse/vanished.ts)',
    ]);
  });
});
