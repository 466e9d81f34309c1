import { renderTable } from '../common/table.ts';

/**
 * How a command that lists rows prints them, one rule for every such command: with `--json` the
 * JSON (one indented document, or one line per row for a script that reads line by line), else a
 * table, or one sentence when there is no row (an empty table reads as a broken command).
 */
export interface RowsOutput<T> {
  /** The command's `--json` flag. */
  json: boolean | undefined;
  /** What `--json` prints: one document, indented; or `line` of each row, one a line. */
  asJson: { document: unknown } | { line: (row: T) => unknown };
  /** The sentence printed instead of an empty table. */
  none: string;
  head: string[];
  cells: (row: T) => (string | number)[];
}

/** What was printed: the command adds its notes below a table only. */
export type Printed = 'json' | 'none' | 'table';

export function printRows<T>(rows: readonly T[], out: RowsOutput<T>): Printed {
  if (out.json) {
    const j = out.asJson;
    if ('document' in j) process.stdout.write(`${JSON.stringify(j.document, null, 2)}\n`);
    else for (const r of rows) process.stdout.write(`${JSON.stringify(j.line(r))}\n`);
    return 'json';
  }
  if (rows.length === 0) {
    process.stdout.write(`${out.none}\n`);
    return 'none';
  }
  process.stdout.write(`${renderTable(out.head, rows.map(out.cells))}\n`);
  return 'table';
}
