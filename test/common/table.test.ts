import { describe, expect, it } from 'vitest';
import { displayWidth, renderTable } from '../../src/common/table.ts';
import { escapeControls, terminalText } from '../../src/common/terminal-text.ts';

describe('renderTable', () => {
  it('when a cell holds wide (CJK) characters, then the columns after it still line up', () => {
    const out = renderTable(
      ['name', 'n'],
      [
        ['決算短信 Q2.pdf', 50],
        ['Annual report.pdf', 7],
      ],
    ).split('\n');
    // The last column is right-aligned numbers, so aligned rows end at the same terminal column.
    expect(displayWidth(out[2]!)).toBe(displayWidth(out[3]!));
    expect(out[2]!.length).toBeLessThan(out[3]!.length);
  });

  it('when numbers are shown, then they are right-aligned with thousands separators', () => {
    const out = renderTable(
      ['k', 'v'],
      [
        ['a', 1234567],
        ['b', 5],
      ],
    ).split('\n');
    expect(out[2]).toBe('a  1,234,567');
    expect(out[3]).toBe('b          5');
  });
});

describe('text from data on a terminal', () => {
  it('when a cell holds control characters, then the table shows each escaped and the columns still line up', () => {
    const out = renderTable(
      ['field', 'n'],
      [
        ['\u001b]0;owned\u0007\u001b[2K\rname\n\t\u007f', 1],
        ['\u009b31m\u2028\u202e', 22],
      ],
    );
    expect(out).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u202e]/);
    const lines = out.split('\n');
    expect(lines[2]).toBe('\\x1b]0;owned\\x07\\x1b[2K\\rname\\n\\t\\x7f   1');
    expect(lines[3]).toMatch(/^\\u009b31m\\u2028\\u202e +22$/);
    expect(lines[3]?.length).toBe(lines[2]?.length);
  });

  it('when a message of several lines quotes data, then its own newlines stay and every other control is escaped', () => {
    expect(terminalText('bad setting:\n  - A: \u001b[2K\rfake\u0085')).toBe(
      'bad setting:\n  - A: \\x1b[2K\\rfake\\u0085',
    );
    expect(escapeControls('a\nb')).toBe('a\\nb');
    // Printable text, wide and combining characters included, is left as it is.
    expect(escapeControls('決算 café e\u0301 \\x1b')).toBe('決算 café e\u0301 \\x1b');
  });
});
