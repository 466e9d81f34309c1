import { MIN_SECRET_LENGTH, maskValues, redactText, secretValues } from '../log.ts';

/**
 * Every credential the client holds (configured ones and access tokens obtained by exchange).
 * Text that came from outside — an upstream error body, a network error message — passes through
 * `scrub` before it is put in an error message, an error's details or a log line, because a
 * server may echo back what it was sent.
 */
export interface SecretScrubber {
  add(secret: string | undefined): void;
  scrub(text: string): string;
}

export function createSecretScrubber(initial: ReadonlyArray<string | undefined>): SecretScrubber {
  const secrets = new Set<string>();
  const add = (s: string | undefined) => {
    if (s !== undefined && s.length >= MIN_SECRET_LENGTH) secrets.add(s);
  };
  initial.forEach(add);
  return {
    add,
    scrub(text: string): string {
      return redactText(maskValues(text, secretValues([...secrets])));
    },
  };
}
