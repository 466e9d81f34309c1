import { describe, expect, it } from 'vitest';
import { uuidsIn } from '../../src/warehouse/privacy/keyed-id.ts';

// The ids a quarantined line names, as the loader's suppression and `forget` search it: what
// JSON.parse would read, escapes decoded, in lower case.
const ID = '5f0c2a8e-1b2c-4d3e-8f40-0123456789ab';

describe('uuidsIn', () => {
  it('when a line names an id plainly or in upper case, then it is found in lower case', () => {
    expect(uuidsIn(`{"User ID":"${ID}"}`)).toEqual([ID]);
    expect(uuidsIn(`{"User ID":"${ID.toUpperCase()}"`)).toEqual([ID]);
  });

  it('when a line spells an id with JSON escapes, then it is found as JSON.parse reads it', () => {
    const escaped = `\\u0035f0c2a8e\\u002D1b2c-4d3e-8f40-0123456789\\u0041B`;
    const line = `{"User ID":"${escaped}","Message Time":"yesterday"}`;
    expect(JSON.parse(line)['User ID'].toLowerCase()).toBe(ID);
    expect(line).not.toContain(ID);
    expect(uuidsIn(line)).toContain(ID);
  });

  it('when a line names no id, then none is found', () => {
    expect(uuidsIn('{"User ID":"\\u0041","x":"5f0c2a8e-1b2c"}')).toEqual([]);
  });
});
