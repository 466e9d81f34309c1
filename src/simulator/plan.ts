import { f64At, itemAt } from '../common/checked.ts';
import { civilFromDays, formatDay, parseDay as parseCivilDay } from '../common/civil-date.ts';
import { hash4, Rng, unit } from './prng.ts';

/**
 * The procedural model: threads are born on a day, numbered 0..threadsPerDay-1, and each has a
 * few turns (user input + assistant reply) spread over at most MAX_SPAN_DAYS following days. A
 * day's export is the replies of threads born in the window [day - MAX_SPAN_DAYS, day] that fall
 * on it, so any day can be generated alone in constant memory.
 */

export const DAY_MS = 86_400_000;
export const MAX_TURNS = 8;
/** Turns of a thread fall on its birth day or the MAX_SPAN_DAYS days after it. */
export const MAX_SPAN_DAYS = 3;
const SPAN_END_MS = (MAX_SPAN_DAYS + 1) * 86_400_000;
const TURN_COUNTS = [1, 1, 2, 2, 3, 3, 4, 5, 6, 8];
export const AVG_TURNS = 3.5;
/** Threads 0 and 1 of every day are fixed edge cases of the UTC day filter (see planThread). */
export const EDGE_THREADS = 2;

/** UTC offsets of Message Time, minutes; the first four render as Z, the fifth as +00:00. */
export const OFFSETS = [0, 0, 0, 0, 0, 60, 120, 330, 345, 540, -240, -300, -420, -180, 600, -570];
const OFFSET_PLUS_ZERO = 4;
/** Flag in offsetIdx: render Message Time without fractional seconds. */
const WHOLE_SECOND = 0x80;

export const P_RESTRICTED_MOD = 37;
export function isRestrictedUser(userIndex: number): boolean {
  return userIndex % P_RESTRICTED_MOD === 11;
}

export interface ThreadPlan {
  day: number;
  index: number;
  userIndex: number;
  turns: number;
  userTime: Float64Array;
  replyTime: Float64Array;
  arrival: Float64Array;
  cancelled: Uint8Array;
  offsetIdx: Uint8Array;
  /** Turns whose input cites the thread's uploaded file (bit i). */
  fileTurns: number;
  hasFile: boolean;
  renameAt: number;
  deleteAt: number;
}

export function newPlan(): ThreadPlan {
  return {
    day: 0,
    index: 0,
    userIndex: 0,
    turns: 0,
    userTime: new Float64Array(MAX_TURNS),
    replyTime: new Float64Array(MAX_TURNS),
    arrival: new Float64Array(MAX_TURNS),
    cancelled: new Uint8Array(MAX_TURNS),
    offsetIdx: new Uint8Array(MAX_TURNS),
    fileTurns: 0,
    hasFile: false,
    renameAt: -1,
    deleteAt: -1,
  };
}

const TAG_PLAN = 0x1001;

/** Fills `out` with thread (day, index); reuses its arrays so the export loop allocates nothing. */
export function planThread(
  seed: number,
  users: number,
  day: number,
  index: number,
  out: ThreadPlan,
): ThreadPlan {
  const rng = new Rng(hash4(seed, day, index, TAG_PLAN));
  out.day = day;
  out.index = index;
  const r = rng.next();
  out.userIndex = Math.floor(users * r * r);
  out.hasFile = false;
  out.fileTurns = 0;
  out.renameAt = -1;
  out.deleteAt = -1;
  const base = day * DAY_MS;
  if (index < EDGE_THREADS) {
    // Thread 0 answers at the last millisecond of the UTC day, written with +02:00 so that its local
    // date is the next day; thread 1 answers at the first millisecond, written with -05:00.
    out.turns = 1;
    const t = index === 0 ? base + DAY_MS - 1 : base;
    out.replyTime[0] = t;
    out.userTime[0] = t - 40_000;
    out.arrival[0] = t;
    out.cancelled[0] = 0;
    out.offsetIdx[0] = index === 0 ? 6 : 11;
    return out;
  }
  const wanted = itemAt(TURN_COUNTS, rng.int(TURN_COUNTS.length));
  out.hasFile = rng.chance(0.15);
  let t = base + rng.int(DAY_MS);
  let turns = 0;
  for (let i = 0; i < wanted; i++) {
    if (i > 0) t += rng.chance(0.2) ? rng.range(8 * 3600_000, 20 * 3600_000) : rng.range(20_000, 2_400_000);
    // A thread lives at most MAX_SPAN_DAYS days after its birth day; later turns never happen.
    if (t + 90_000 >= SPAN_END_MS + base) break;
    turns++;
    out.userTime[i] = t;
    t += rng.range(2_000, 90_000);
    // One time in five is written without fractional seconds (and is a whole second).
    const wholeSecond = rng.chance(0.2);
    if (wholeSecond) t -= t % 1000;
    out.replyTime[i] = t;
    out.cancelled[i] = rng.chance(0.05) ? 1 : 0;
    out.arrival[i] = rng.chance(0.03)
      ? t + rng.range(2 * 3600_000, 40 * 3600_000)
      : t + rng.range(500, 60_000);
    out.offsetIdx[i] = rng.int(OFFSETS.length) | (wholeSecond ? WHOLE_SECOND : 0);
    if (out.hasFile && (i === 0 || rng.chance(0.5))) out.fileTurns |= 1 << i;
  }
  out.turns = turns;
  if (rng.chance(0.1)) out.renameAt = f64At(out.userTime, 0) + rng.range(600_000, 48 * 3600_000);
  if (rng.chance(0.03)) out.deleteAt = t + rng.range(3600_000, 72 * 3600_000);
  return out;
}

const PAD2: string[] = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0'));
const PAD3: string[] = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));

/** ISO 8601 of a (local) wall time without zone, by civil-from-days arithmetic: toISOString is slow. */
function wallTime(ms: number, fraction: boolean): string {
  const days = Math.floor(ms / DAY_MS);
  let rem = ms - days * DAY_MS;
  const [y, m, d] = civilFromDays(days);
  const hh = Math.floor(rem / 3_600_000);
  rem -= hh * 3_600_000;
  const mi = Math.floor(rem / 60_000);
  rem -= mi * 60_000;
  const ss = Math.floor(rem / 1000);
  const msec = rem - ss * 1000;
  const base = `${y}-${PAD2[m]}-${PAD2[d]}T${PAD2[hh]}:${PAD2[mi]}:${PAD2[ss]}`;
  return fraction ? `${base}.${PAD3[msec]}` : base;
}

/** Renders an instant with the given offset as ISO 8601, e.g. 2026-11-20T23:59:59.999+02:00. */
export function formatWithOffset(ms: number, code: number): string {
  const offsetIdx = code & ~WHOLE_SECOND;
  const fraction = (code & WHOLE_SECOND) === 0;
  const minutes = OFFSETS[offsetIdx] ?? 0;
  if (minutes === 0 && offsetIdx !== OFFSET_PLUS_ZERO) return `${wallTime(ms, fraction)}Z`;
  const abs = Math.abs(minutes);
  return `${wallTime(ms + minutes * 60_000, fraction)}${minutes < 0 ? '-' : '+'}${PAD2[Math.floor(abs / 60)]}:${PAD2[abs % 60]}`;
}

export function dayOf(ms: number): number {
  return Math.floor(ms / DAY_MS);
}

export function dayToString(day: number): string {
  return formatDay(day);
}

/** Parses YYYY-MM-DD strictly (a real calendar date) into a day number. */
export function parseDay(s: string): number | undefined {
  return parseCivilDay(s) ?? undefined;
}

export { unit };
