/**
 * Text from data (a field name an export sent, a receiver's answer, an error a server gave) made
 * safe to print on a terminal. A control character written raw is an instruction to the
 * terminal, not text: ESC starts sequences that retitle the window, move the cursor or erase
 * lines, CR returns to the line's start and overwrites it, BEL rings; the C1 controls
 * (U+0080-U+009F) act as ESC sequences on terminals that read them; U+2028/U+2029 break lines
 * in some; the bidirectional overrides and isolates reorder what follows them on screen. Each is
 * shown escaped instead (`\x1b`, `\r`, `\u009b`, `\u202e`), so what a table or a message shows
 * is what the data holds. JSON output needs none of this: JSON.stringify escapes C0 controls
 * itself, and a program reads it, not a terminal.
 */

// Every code point escaped in a cell (newlines and tabs too: they break a table's rows and columns).
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
// The same in a message, less the newline: a message may be several lines of its own.
const CONTROLS_BUT_NEWLINE =
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escaped(c: string): string {
  const named = NAMED[c];
  if (named !== undefined) return named;
  const code = c.charCodeAt(0);
  return code < 0x80
    ? `\\x${code.toString(16).padStart(2, '0')}`
    : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** One value for a table cell or a line of output: every control character escaped, newlines included. */
export function escapeControls(s: string): string {
  return s.replace(CONTROLS, escaped);
}

/** A message of one or more lines: every control character escaped but the newlines between its lines. */
export function terminalText(s: string): string {
  return s.replace(CONTROLS_BUT_NEWLINE, escaped);
}
