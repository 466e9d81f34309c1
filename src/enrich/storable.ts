// JSON.stringify writes U+0000 as \u0000 and a lone surrogate as its escape \udXXX (lower-case
// hex; a surrogate pair is written as itself). An odd number of backslashes before `u` is such an
// escape; an even number is literal backslashes followed by the text.
const NUL_ESCAPE = /(?<!\\)(?:\\\\)*\\u0000/;
const LONE_SURROGATE_ESCAPE = /(?<!\\)(?:\\\\)*\\ud[89a-f][0-9a-f]{2}/;

export type NotStorable = { code: 'nul_character' | 'lone_surrogate'; what: string };

/**
 * Text PostgreSQL cannot store, anywhere in `v` (keys included): U+0000 (neither text nor jsonb
 * holds it) and a lone UTF-16 surrogate (not Unicode: jsonb and json_to_recordset refuse its
 * escape). A record holding either could never be written and would fail its page on every
 * attempt, so it is quarantined instead.
 */
export function notStorable(v: unknown): NotStorable | undefined {
  const json = JSON.stringify(v) ?? '';
  // The plain searches are much cheaper than the patterns and almost always find nothing.
  if (json.includes('\\u0000') && NUL_ESCAPE.test(json)) {
    return { code: 'nul_character', what: 'U+0000, which PostgreSQL cannot store' };
  }
  if (json.includes('\\ud') && LONE_SURROGATE_ESCAPE.test(json)) {
    return {
      code: 'lone_surrogate',
      what: 'a lone UTF-16 surrogate, which is not Unicode and PostgreSQL cannot store',
    };
  }
  return undefined;
}

/**
 * A free text from the service (a thread name, an error) as PostgreSQL can store it: U+0000 and
 * lone surrogates, which PostgreSQL refuses (in text, and as json escapes), become U+FFFD. Such
 * texts are not records to quarantine; entries and artifacts that hold them are (notStorable).
 */
export function storableText(s: string): string {
  const t = s.toWellFormed();
  return t.includes('\u0000') ? t.replaceAll('\u0000', '\uFFFD') : t;
}
