import { describe, expect, it } from 'vitest';
import { f64At, itemAt, present, u8At } from '../../src/common/checked.ts';

describe('checked access', () => {
  it('when the index is in range, then the element comes back; when it is not, then it throws', () => {
    expect(itemAt(['a', 'b'], 1)).toBe('b');
    expect(() => itemAt(['a'], 1)).toThrow(/index 1 is out of range \(length 1\)/);
    expect(f64At(new Float64Array([0, 2.5]), 1)).toBe(2.5);
    expect(() => f64At(new Float64Array(2), 2)).toThrow(RangeError);
    expect(u8At(new Uint8Array([7]), 0)).toBe(7);
    expect(() => u8At(new Uint8Array(1), -1)).toThrow(RangeError);
  });

  it('when a value is present (falsy ones too), then it comes back; when it is missing, then it throws naming it', () => {
    expect(present(0, 'zero')).toBe(0);
    expect(present('', 'empty')).toBe('');
    expect(() => present(undefined, 'the plan of thread t')).toThrow('the plan of thread t is missing');
    expect(() => present(null, 'a match')).toThrow('a match is missing');
  });
});
