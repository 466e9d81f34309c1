import { itemAt } from '../common/checked.ts';

/**
 * Counter-based randomness: every value of the data set is a pure function of the seed and a few
 * integer coordinates (day, thread, turn), so any day or thread can be generated on its own, in any
 * order, without holding the rest. Math.imul keeps everything in fast 32-bit integer arithmetic.
 */

export function fmix(x: number): number {
  let h = x | 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export function hash4(a: number, b: number, c: number, d: number): number {
  let h = fmix(a ^ 0x9e3779b9);
  h = fmix((h ^ b) + 0x7f4a7c15);
  h = fmix((h ^ c) + 0x1b873593);
  h = fmix((h ^ d) + 0x6a09e667);
  return h;
}

/** A uniform number in [0, 1) from a 32-bit hash. */
export function unit(h: number): number {
  return h / 4294967296;
}

/** FNV-1a of a string, for seeding from ids that are not coordinates (threads created via the API). */
export function stringHash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Sequential draws from one coordinate (mulberry32). */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed | 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  range(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  word(): number {
    return Math.floor(this.next() * 4294967296) >>> 0;
  }
}

const HEX: string[] = [];
for (let i = 0; i < 256; i++) HEX.push(i.toString(16).padStart(2, '0'));

function hex32(w: number): string {
  return (
    itemAt(HEX, (w >>> 24) & 255) +
    itemAt(HEX, (w >>> 16) & 255) +
    itemAt(HEX, (w >>> 8) & 255) +
    itemAt(HEX, w & 255)
  );
}

/** Formats four 32-bit words as a UUID, forcing version 4 and the RFC 4122 variant. */
export function uuidFromWords(w0: number, w1: number, w2: number, w3: number): string {
  const a = hex32(w0);
  const b = hex32(((w1 & 0xffff0fff) | 0x00004000) >>> 0);
  const c = hex32(((w2 & 0x3fffffff) | 0x80000000) >>> 0);
  const d = hex32(w3);
  return `${a}-${b.slice(0, 4)}-${b.slice(4)}-${c.slice(0, 4)}-${c.slice(4)}${d}`;
}

export function uuidFromHash(seed: number, a: number, b: number, tag: number): string {
  return uuidFromWords(
    hash4(seed, a, b, tag),
    hash4(seed, a, b, tag + 1),
    hash4(seed, a, b, tag + 2),
    hash4(seed, a, b, tag + 3),
  );
}

const TAG_ID_B = 0x5151;
const TAG_ID_T = 0x7171;

/**
 * Procedural thread ids encode their coordinates (birth day, index) reversibly, masked so they
 * look random: a history request can find its thread without any index of all threads.
 */
export function encodeThreadId(seed: number, day: number, index: number): string {
  const w1 = ((hash4(seed, day, index, 0x11) & 0xffff0fff) | 0x00004000) >>> 0;
  const w2 = ((hash4(seed, day, index, 0x22) & 0x3fffffff) | 0x80000000) >>> 0;
  const w0 = (day ^ hash4(seed, w1, w2, TAG_ID_B)) >>> 0;
  const w3 = (index ^ hash4(seed, w1, w2, TAG_ID_T)) >>> 0;
  return uuidFromWords(w0, w1, w2, w3);
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isUuid(s: string): boolean {
  return UUID_RE.test(s.toLowerCase());
}

export function decodeThreadId(seed: number, id: string): { day: number; index: number } | undefined {
  const s = id.toLowerCase();
  if (!UUID_RE.test(s)) return undefined;
  const hex = s.replaceAll('-', '');
  const w0 = Number.parseInt(hex.slice(0, 8), 16);
  const w1 = Number.parseInt(hex.slice(8, 16), 16);
  const w2 = Number.parseInt(hex.slice(16, 24), 16);
  const w3 = Number.parseInt(hex.slice(24, 32), 16);
  const day = (w0 ^ hash4(seed, w1, w2, TAG_ID_B)) >>> 0;
  const index = (w3 ^ hash4(seed, w1, w2, TAG_ID_T)) >>> 0;
  if (day > 1_000_000 || index > 0x7fffffff) return undefined;
  return encodeThreadId(seed, day, index) === s ? { day, index } : undefined;
}
