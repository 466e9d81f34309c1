import { describe, expect, it } from 'vitest';
import { quickMessageId } from '../../src/ingest/merge/load.ts';

const quick = (line: string) => quickMessageId(Buffer.from(line));

const ID = '0F8FAD5B-D9CB-469F-A165-70867728950E';

describe('quickMessageId (routing a line before it is parsed)', () => {
  it('when the key occurs once, then the id is read and lower-cased, whatever the spacing', () => {
    expect(quick(`{"Input":"x","Message ID":"${ID}"}`)).toBe(ID.toLowerCase());
    expect(quick(`{"Message ID" :  "${ID}", "Input": "x"}`)).toBe(ID.toLowerCase());
  });

  it('when the key occurs twice (a nested object), then nothing is guessed', () => {
    expect(quick(`{"meta":{"Message ID":"${ID}"},"Message ID":"${ID}"}`)).toBeUndefined();
  });

  it('when the value is not a plain UUID string, then nothing is guessed', () => {
    expect(quick('{"Message ID":"abc"}')).toBeUndefined();
    expect(quick('{"Message ID":12}')).toBeUndefined();
    expect(quick(`{"Message ID":"${ID}x"}`)).toBeUndefined();
    expect(quick('{"Input":"Message ID"}')).toBeUndefined();
  });

  it('when the text mentions the key inside a string value, then only the real key counts', () => {
    // Inside a JSON string the quotes are escaped, so the raw text never holds "Message ID" there.
    expect(quick(`{"Input":"what is \\"Message ID\\"?","Message ID":"${ID}"}`)).toBe(ID.toLowerCase());
  });
});
