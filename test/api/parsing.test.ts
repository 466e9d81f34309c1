import { describe, expect, it } from 'vitest';
import { fullJitterDelay, retryDelay } from '../../src/api/backoff.ts';
import { fileNameFromContentDisposition } from '../../src/api/content-disposition.ts';
import { trimUpstreamError } from '../../src/api/http-error.ts';
import { parseRetryAfter } from '../../src/api/retry-after.ts';

const id = (s: string) => s;

describe('Retry-After', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  it('when given delay-seconds, then milliseconds', () => {
    expect(parseRetryAfter('7', now)).toBe(7000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
  });
  it('when given an HTTP date, then the time until it, never negative', () => {
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:59:00 GMT', now)).toBe(0);
  });
  it('when absent or unreadable, then undefined', () => {
    for (const v of [null, undefined, '', '-3', '1.5', 'soon'])
      expect(parseRetryAfter(v, now)).toBeUndefined();
  });
});

describe('backoff', () => {
  it('when random is 0 or near 1, then the delay spans [0, min(cap, base·2^n))', () => {
    expect(fullJitterDelay(0, 100, 1000, () => 0)).toBe(0);
    expect(fullJitterDelay(3, 100, 1000, () => 0.5)).toBe(400);
    expect(fullJitterDelay(10, 100, 1000, () => 0.5)).toBe(500);
  });
  it('when a Retry-After is known, then it wins over backoff but is capped', () => {
    const o = { baseMs: 100, capMs: 1000, maxRetryAfterMs: 5000, random: () => 0.5 };
    expect(retryDelay(0, 3000, o)).toBe(3000);
    expect(retryDelay(0, 9000, o)).toBe(5000);
    expect(retryDelay(1, undefined, o)).toBe(100);
  });
});

describe('Content-Disposition', () => {
  it('when quoted, bare or RFC 8187 encoded, then the file name', () => {
    expect(fileNameFromContentDisposition('attachment; filename="message_history_1.jsonl"')).toBe(
      'message_history_1.jsonl',
    );
    expect(fileNameFromContentDisposition('attachment; filename=a.jsonl')).toBe('a.jsonl');
    expect(fileNameFromContentDisposition(`attachment; filename="x"; filename*=UTF-8''h%C3%A9.jsonl`)).toBe(
      'hé.jsonl',
    );
  });
  it('when the name carries a path or is missing, then only the last segment or undefined', () => {
    expect(fileNameFromContentDisposition('attachment; filename="../../etc/passwd"')).toBe('passwd');
    expect(fileNameFromContentDisposition('attachment')).toBeUndefined();
    expect(fileNameFromContentDisposition(null)).toBeUndefined();
  });
});

describe('upstream error trimming', () => {
  it('when the body has known and unknown fields, then only known ones survive, shortened', () => {
    const t = trimUpstreamError(
      JSON.stringify({
        detail: 'x'.repeat(500),
        code: 'E1',
        headers: { a: 1 },
        stack: 'at ...',
        message: 'm',
      }),
      id,
    );
    expect(Object.keys(t ?? {}).sort()).toEqual(['code', 'detail', 'message']);
    expect(t?.detail?.length).toBe(201);
  });
  it('when detail is a FastAPI validation list, then it is flattened to "loc: msg"', () => {
    const detail = Array.from({ length: 5 }, (_, i) => ({ loc: ['query', `p${i}`], msg: 'bad', type: 't' }));
    expect(trimUpstreamError(JSON.stringify({ detail }), id)?.detail).toBe(
      'query.p0: bad; query.p1: bad; query.p2: bad (+2 more)',
    );
  });
  it('when the body is not a JSON object, then nothing is kept', () => {
    expect(trimUpstreamError('<html>oops</html>', id)).toBeUndefined();
    expect(trimUpstreamError('[1,2]', id)).toBeUndefined();
  });
});
