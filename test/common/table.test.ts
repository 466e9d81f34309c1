import { describe, expect, it } from 'vitest';
import { displayWidth, renderTable } from '../../src/common/table.ts';

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
