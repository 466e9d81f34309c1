import { createHash } from 'node:crypto';

/** Deterministic export records for loader tests (the simulator is the source for HTTP tests). */
export interface FakeRecord {
  Input: string;
  Response: string;
  'Message ID': string;
  'Message Time': string;
  'Thread ID': string;
  'User ID': string;
  [extra: string]: unknown;
}

export function uuidFrom(seed: string): string {
  const h = createHash('sha1').update(seed).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export function makeRecords(
  n: number,
  opts: { day?: string; seed?: string; threads?: number } = {},
): FakeRecord[] {
  const seed = opts.seed ?? 's';
  const threads = opts.threads ?? 7;
  const out: FakeRecord[] = [];
  for (let i = 0; i < n; i++) {
    const day = opts.day ?? `2026-11-${String(1 + (i % 3)).padStart(2, '0')}`;
    const t = i % threads;
    const hh = String(i % 24).padStart(2, '0');
    const mm = String(i % 60).padStart(2, '0');
    out.push({
      Input: `question ${i} ✓`,
      Response: `answer ${i} `.repeat(1 + (i % 5)),
      'Message ID': uuidFrom(`${seed}:m:${i}`),
      'Message Time': `${day}T${hh}:${mm}:07.123Z`,
      'Thread ID': uuidFrom(`${seed}:t:${t}`),
      'User ID': uuidFrom(`${seed}:u:${t % 3}`),
    });
  }
  return out;
}

export function toJsonl(records: unknown[]): string {
  return `${records.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n')}\n`;
}
