import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { toFailure } from '../../activities/failures.ts';
import {
  CrsError,
  ERROR_CODES,
  type ErrorCode,
  isNonRetryableCode,
  NON_RETRYABLE_CODES,
} from '../../src/errors.ts';

describe('the one list of error codes', () => {
  it('when the non-retryable codes are derived, then they are the eight no retry can fix', () => {
    expect([...NON_RETRYABLE_CODES].sort()).toEqual(
      [
        'CONFIG_INVALID',
        'USAGE',
        'HTTP_UNAUTHORIZED',
        'HTTP_FORBIDDEN',
        'HTTP_UNPROCESSABLE',
        'HTTP_BAD_RESPONSE',
        'HTTP_CLIENT',
        'MIGRATION_FAILED',
      ].sort(),
    );
    expect(isNonRetryableCode('HTTP_THROTTLED')).toBe(false);
    expect(isNonRetryableCode('toString')).toBe(false);
  });

  it.each(Object.keys(ERROR_CODES).filter((c) => c !== 'CANCELLED') as ErrorCode[])(
    'when an activity throws a retryable CrsError %s, then the failure is non-retryable exactly when the list says so',
    (code) => {
      const failure = toFailure(new CrsError(code, 'boom', { retryable: true }));
      expect(failure).toBeInstanceOf(ApplicationFailure);
      expect((failure as ApplicationFailure).type).toBe(code);
      expect((failure as ApplicationFailure).nonRetryable).toBe(!ERROR_CODES[code].retryable);
    },
  );
});
