// The UUID check shared by the parser, the fast path and the over-long line's scanner, in a
// module of its own so that none of them imports another for it (line-fields.ts is imported by
// the splitter, which the parser imports).

export const HEX_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX_VALUE[48 + i] = i;
for (let i = 0; i < 6; i++) {
  HEX_VALUE[97 + i] = 10 + i;
  HEX_VALUE[65 + i] = 10 + i;
}

/**
 * Whether `s` is a UUID in the 8-4-4-4-12 hex form, either case (what
 * /^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$/ accepts): 0 when not, 1 when it is
 * lower-case already, 2 when it holds an upper-case digit. By hand, as three regex tests and
 * three toLowerCase calls cost a tenth of the parser's time per record.
 */
export function uuidForm(s: string): 0 | 1 | 2 {
  if (s.length !== 36) return 0;
  let upper = false;
  for (let i = 0; i < 36; i++) {
    const c = s.charCodeAt(i);
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (c !== 45) return 0; // '-'
    } else if (c > 127 || (HEX_VALUE[c] ?? -1) < 0) return 0;
    else if (c <= 70 && c >= 65) upper = true; // 'A'-'F'
  }
  return upper ? 2 : 1;
}
