import { afterEach, describe, expect, it, vi } from 'vitest';
import { printRows, type RowsOutput } from '../../src/cli/output.ts';

interface Row {
  day: string;
  n: number;
}

const rows: Row[] = [
  { day: '2026-11-01', n: 1200 },
  { day: '2026-11-02', n: 3 },
];

/** What printRows wrote to stdout, and what it says it printed. */
function printed(list: Row[], out: Partial<RowsOutput<Row>>) {
  let text = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    text += String(chunk);
    return true;
  });
  const what = printRows(list, {
    json: false,
    asJson: { document: { list } },
    none: 'no days',
    head: ['day', 'rows'],
    cells: (r) => [r.day, r.n],
    ...out,
  });
  vi.restoreAllMocks();
  return { what, text };
}

describe('a list printed by a command', () => {
  afterEach(() => vi.restoreAllMocks());

  it('when --json asks for one document, then it is printed indented, once, whatever the rows', () => {
    const r = printed(rows, { json: true, asJson: { document: { days: rows, note: 'x' } } });
    expect(r.what).toBe('json');
    expect(JSON.parse(r.text)).toEqual({ days: rows, note: 'x' });
    expect(r.text).toContain('\n  "days"');
    expect(printed([], { json: true, asJson: { document: { days: [] } } }).text).toBe('{\n  "days": []\n}\n');
  });

  it('when --json asks for lines, then each row is one line of JSON, and no row prints nothing', () => {
    const r = printed(rows, { json: true, asJson: { line: (x) => ({ d: x.day }) } });
    expect(r.what).toBe('json');
    expect(r.text).toBe('{"d":"2026-11-01"}\n{"d":"2026-11-02"}\n');
    expect(printed([], { json: true, asJson: { line: (x) => x } }).text).toBe('');
  });

  it('when there are rows and no --json, then they are a table with the head', () => {
    const r = printed(rows, {});
    expect(r.what).toBe('table');
    const lines = r.text.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^day\s+rows$/);
    expect(r.text).toMatch(/2026-11-01\s+1,200/);
    expect(r.text).toMatch(/2026-11-02\s+3/);
  });

  it('when there is no row and no --json, then the sentence is printed instead of an empty table', () => {
    expect(printed([], {})).toEqual({ what: 'none', text: 'no days\n' });
  });
});
