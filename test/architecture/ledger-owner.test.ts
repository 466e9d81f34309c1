import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SOURCE_DIRS } from '../../scripts/lib/source-ast.ts';

/**
 * The ledger has one owner: src/warehouse/ledger.ts is the only file of the source that writes
 * `sync_days` or `sync_runs` (the migrations, outside the source tree, create and reshape them).
 * Every other file reads them at most, so a run or a day changes state in one place, however the
 * run was started (a workflow, an import, a replay).
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const OWNER = 'src/warehouse/ledger.ts';

/** A write to a ledger table: SQL (insert, update, delete, merge, truncate) or a kysely builder. */
const WRITES = [
  /\b(?:insert\s+into|update|delete\s+from|merge\s+into|truncate(?:\s+table)?)\s+(?:only\s+)?sync_(?:days|runs)\b/i,
  /\.(?:insertInto|updateTable|deleteFrom|mergeInto|replaceInto)\(\s*['"`]sync_(?:days|runs)\b/,
];

function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const e of readdirSync(path.join(ROOT, rel), { withFileTypes: true })) {
      const child = `${rel}/${e.name}`;
      if (e.isDirectory()) walk(child);
      else if (e.name.endsWith('.ts')) out.push(child);
    }
  };
  for (const d of SOURCE_DIRS) walk(d);
  return out;
}

/** Each write to a ledger table in `text`, as `file: statement` (a statement may span lines). */
function writesIn(file: string, text: string): string[] {
  const flat = text.replace(/\s+/g, ' ');
  return WRITES.flatMap((w) =>
    [...flat.matchAll(new RegExp(w.source, `${w.flags}g`))].map((m) => `${file}: ${m[0]}`),
  );
}

describe('the owner of the ledger', () => {
  it('when the source is read, then only the ledger module writes sync_days or sync_runs', () => {
    const files = sourceFiles();
    expect(files).toContain(OWNER);
    const writers = files
      .filter((f) => f !== OWNER)
      .flatMap((f) => writesIn(f, readFileSync(path.join(ROOT, f), 'utf8')));
    expect(writers).toEqual([]);
    // The owner does write both tables: the rule is about something real.
    const own = writesIn(OWNER, readFileSync(path.join(ROOT, OWNER), 'utf8'));
    expect(own.length).toBeGreaterThan(5);
  });

  it('when the rule is checked against writes in every form, then each is caught and a read is not', () => {
    const caught = (s: string) => writesIn('x.ts', s).length > 0;
    expect(caught('await client.query(`update sync_days set lines_committed = 1 where day = $1`)')).toBe(
      true,
    );
    expect(caught('`insert into sync_runs (load_id) values ($1)`')).toBe(true);
    expect(caught("db.updateTable('sync_days').set({ status: 'failed' })")).toBe(true);
    expect(caught("    .insertInto('sync_runs')")).toBe(true);
    expect(caught('`update\n   sync_days set x = 1`')).toBe(true);
    expect(caught('`delete from sync_days where day = $1`')).toBe(true);
    expect(caught("db.selectFrom('sync_days').selectAll()")).toBe(false);
    expect(caught('select deletes_force_reason from sync_days where day = $1 for update')).toBe(false);
  });
});
