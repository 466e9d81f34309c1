import { describe, expect, it } from 'vitest';
import { incompleteReason } from '../../src/api/export-stream.ts';

const whole = {
  complete: true,
  status: 200,
  contentType: 'application/x-ndjson; charset=utf-8',
  contentLength: undefined,
  bytesRead: 120,
  lastByte: 10,
};

describe('whether an export body is known complete', () => {
  it('when it ended normally with status 200, a JSONL type and a final newline, then it is', () => {
    expect(incompleteReason(whole)).toBeNull();
  });

  it.each([
    'application/x-ndjson',
    'application/ndjson',
    'application/jsonl',
    'application/x-jsonlines',
    'application/jsonlines',
    'APPLICATION/JSONL; charset=utf-8',
    'text/plain; charset=utf-8',
  ])('when the content type is %s, then it is accepted', (contentType) => {
    expect(incompleteReason({ ...whole, contentType })).toBeNull();
  });

  it.each([
    ['text/html; charset=utf-8', /"text\/html" is not JSONL/],
    ['application/json', /"application\/json" is not JSONL/],
    ['application/problem+json', /not JSONL/],
    ['application/octet-stream', /not JSONL/],
    [undefined, /no content type/],
    ['', /no content type/],
  ])('when the content type is %s, then it is not known complete', (contentType, why) => {
    expect(incompleteReason({ ...whole, contentType })).toMatch(why);
  });

  it('when the body did not end normally, then it is not known complete', () => {
    expect(incompleteReason({ ...whole, complete: false })).toMatch(/did not end normally/);
  });

  it('when the status is another 2xx, then it is not known complete', () => {
    expect(incompleteReason({ ...whole, status: 206 })).toMatch(/status 206/);
  });

  it('when more bytes arrived than Content-Length announced, then it is not known complete', () => {
    expect(incompleteReason({ ...whole, contentLength: 100 })).toMatch(/120 bytes received, 100 announced/);
  });

  it('when the body is empty, then it is not known complete', () => {
    expect(incompleteReason({ ...whole, bytesRead: 0, lastByte: -1, contentLength: 0 })).toMatch(
      /empty body/,
    );
  });

  it('when the last byte is not a newline, then it is not known complete', () => {
    expect(incompleteReason({ ...whole, lastByte: 125 })).toMatch(/no final newline/);
  });
});
