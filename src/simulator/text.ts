import { itemAt } from '../common/checked.ts';
import { Rng } from './prng.ts';

/**
 * Text of the data set: inputs, long responses and thread names, in several scripts so that the
 * connector meets real-world unicode (accents, CJK, emoji, right-to-left, astral planes). Responses
 * are assembled from a per-seed pool of paragraphs whose JSON-escaped forms are computed once, so a
 * million export lines can be written without escaping a megabyte of text per second.
 */

const TOPICS = [
  'lithium supply chains',
  'European bond yields',
  'semiconductor capex',
  'Q3 revenue guidance',
  'shipping rates in the Red Sea',
  'São Paulo retail sales',
  'Zürich property prices',
  'Tōkyō office vacancies',
  'renewable auctions in India',
  'copper demand from EVs',
  'the ECB rate path',
  'coffee futures',
  'Nordic power prices',
  'Ørsted offshore wind',
  'Munich Re catastrophe losses',
  'LNG contracts in Qatar',
  'Nestlé pricing power',
  'the yen carry trade',
  'Mexican nearshoring',
  'Korean battery makers',
  'Île-de-France tourism',
  'Kraków tech hiring',
  'Istanbul inflation',
  'Cape Town water tariffs',
];

const ASKS = [
  'Summarise the latest on',
  'What changed this week in',
  'Build a table of key figures for',
  'Compare analyst views on',
  'Chart the trend of',
  'Give me the risks around',
  'Draft a briefing note on',
  'Which sources disagree about',
  '¿Qué sabemos sobre',
  'Fasse zusammen:',
  '請總結',
  'Explain like I am new to',
];

const TAILS = [
  '',
  '',
  ' Keep it short.',
  ' Cite sources.',
  ' Focus on 2025 onwards.',
  ' 🙏',
  ' — with numbers please.',
];

const WORDS = [
  'revenue',
  'margin',
  'guidance',
  'volatility',
  'demand',
  'supply',
  'forecast',
  'consensus',
  'spread',
  'yield',
  'inventory',
  'capacity',
  'pricing',
  'regulation',
  'tariff',
  'subsidy',
  'outlook',
  'downgrade',
  'upgrade',
  'quarter',
  'growth',
  'decline',
  'momentum',
  'exposure',
  'hedging',
  'liquidity',
  'valuation',
  'earnings',
  'café',
  'naïve',
  'façade',
  'résumé',
  'Straße',
  'Größe',
  'smörgåsbord',
  'ελληνικά',
  'κέρδη',
  'рынок',
  'прибыль',
  '市场',
  '收入',
  '増加',
  '東京',
  '한국',
  '수익',
  'سوق',
  'ربح',
  'עלייה',
  'मांग',
  '📈',
  '📉',
  '💶',
  '🚢',
  '⚡',
  '𝔼[x]',
  '≈',
  '±2%',
  '€',
  '¥',
  '₹',
  '—',
  '“quoted”',
  '‘single’',
  'x²',
  '½',
  '℃',
];

const NAME_PARTS = [
  'Research',
  'Deep dive',
  'Notes',
  'Briefing',
  'Q&A',
  'Análisis',
  'Überblick',
  '調査',
  'Weekly',
  'Draft',
];

export interface TextPool {
  paragraphs: string[];
  /** paragraphs[i] JSON-escaped, without the surrounding quotes. */
  escaped: string[];
  /** The same, UTF-8 encoded once: encoding multilingual text costs more than making it. */
  escapedBytes: Buffer[];
}

const POOL_SIZE = 1024;

function escapeJson(s: string): string {
  return JSON.stringify(s).slice(1, -1);
}

export function buildTextPool(seed: number): TextPool {
  const rng = new Rng(seed ^ 0x7e47);
  const paragraphs: string[] = [];
  for (let i = 0; i < POOL_SIZE; i++) {
    const sentences: string[] = [];
    const n = rng.range(3, 6);
    for (let s = 0; s < n; s++) {
      const words: string[] = [];
      const w = rng.range(7, 16);
      for (let k = 0; k < w; k++) words.push(rng.pick(WORDS));
      const first = itemAt(words, 0);
      words[0] = first.charAt(0).toUpperCase() + first.slice(1);
      sentences.push(`${words.join(' ')}${rng.pick(['.', '.', '.', '!', '?', ' …'])}`);
    }
    paragraphs.push(sentences.join(' '));
  }
  const escaped = paragraphs.map(escapeJson);
  return { paragraphs, escaped, escapedBytes: escaped.map((e) => Buffer.from(e, 'utf8')) };
}

const ESC_ASKS = ASKS.map((x) => escapeJson(x));
const ESC_TOPICS = TOPICS.map((x) => escapeJson(x));
const ESC_TAILS = TAILS.map((x) => escapeJson(x));
const utf8 = (x: string) => Buffer.from(x, 'utf8');
const B_ASKS = ESC_ASKS.map(utf8);
const B_TOPICS = ESC_TOPICS.map(utf8);
const B_TAILS = ESC_TAILS.map(utf8);
const B_SPACE = utf8(' ');
const B_QMARK = utf8('?');
const B_USE_FILE = utf8(' Use the uploaded file ');
const B_DOT = utf8('.');
const B_HEAD = utf8('Here is what the sources say about ');
const B_PARA = utf8('\\n\\n');

/**
 * Appends bytes to a growing buffer. Export lines are assembled here from pre-encoded pieces;
 * `ascii` is only for text known to be ASCII (ids, times, numbers, JSON punctuation).
 */
export class ByteWriter {
  buf: Buffer;
  off = 0;
  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }
  ensure(n: number): void {
    if (this.off + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.off + n));
    this.buf.copy(next, 0, 0, this.off);
    this.buf = next;
  }
  bytes(b: Buffer): void {
    this.ensure(b.length);
    this.off += b.copy(this.buf, this.off);
  }
  ascii(s: string): void {
    this.ensure(s.length);
    this.off += this.buf.write(s, this.off, 'latin1');
  }
  utf8(s: string): void {
    this.ensure(Buffer.byteLength(s));
    this.off += this.buf.write(s, this.off, 'utf8');
  }
  byte(b: number): void {
    this.ensure(1);
    this.buf[this.off++] = b;
  }
}
/** An input message; `escaped` renders it JSON-escaped from pre-escaped pieces (same draws). */
export function makeInput(rng: Rng, fileId: string | undefined, escaped = false): string {
  const a = rng.int(ASKS.length);
  const t = rng.int(TOPICS.length);
  const tail = rng.int(TAILS.length);
  const base = escaped
    ? `${ESC_ASKS[a]} ${ESC_TOPICS[t]}?${ESC_TAILS[tail]}`
    : `${ASKS[a]} ${TOPICS[t]}?${TAILS[tail]}`;
  // File ids are plain ASCII: no escaping needed.
  return fileId ? `${base} Use the uploaded file ${fileId}.` : base;
}

/** makeInput(rng, fileId, true), written as UTF-8 bytes (the same draws). */
export function writeInput(w: ByteWriter, rng: Rng, fileId: string | undefined): void {
  const a = rng.int(ASKS.length);
  const t = rng.int(TOPICS.length);
  const tail = rng.int(TAILS.length);
  w.bytes(itemAt(B_ASKS, a));
  w.bytes(B_SPACE);
  w.bytes(itemAt(B_TOPICS, t));
  w.bytes(B_QMARK);
  w.bytes(itemAt(B_TAILS, tail));
  if (fileId) {
    w.bytes(B_USE_FILE);
    w.ascii(fileId);
    w.bytes(B_DOT);
  }
}

export function topicOf(rng: Rng): string {
  return rng.pick(TOPICS);
}

export function makeThreadName(rng: Rng): string {
  return `${rng.pick(NAME_PARTS)}: ${rng.pick(TOPICS)}`;
}

/** Picks of a response: a head sentence and paragraph indices, drawn once, rendered twice. */
export interface ResponsePlan {
  topic: number;
  sources: number;
  parts: number[];
}

export function planResponse(rng: Rng): ResponsePlan {
  const topic = rng.int(TOPICS.length);
  const sources = rng.range(2, 9);
  const n = rng.range(2, 6);
  const parts: number[] = [];
  for (let i = 0; i < n; i++) parts.push(rng.int(POOL_SIZE));
  return { topic, sources, parts };
}

export function renderResponse(pool: TextPool, plan: ResponsePlan): string {
  let out = `Here is what the sources say about ${TOPICS[plan.topic]} (${plan.sources} sources reviewed).`;
  for (const p of plan.parts) out += `\n\n${pool.paragraphs[p]}`;
  return out;
}

/** The same text as renderResponse, JSON-escaped, from the pre-escaped pool. */
export function renderResponseEscaped(pool: TextPool, plan: ResponsePlan): string {
  let out = `Here is what the sources say about ${ESC_TOPICS[plan.topic]} (${plan.sources} sources reviewed).`;
  for (const p of plan.parts) out += `\\n\\n${pool.escaped[p]}`;
  return out;
}

/** renderResponseEscaped, written as UTF-8 bytes. */
export function writeResponse(w: ByteWriter, pool: TextPool, plan: ResponsePlan): void {
  w.bytes(B_HEAD);
  w.bytes(itemAt(B_TOPICS, plan.topic));
  w.ascii(` (${plan.sources} sources reviewed).`);
  for (const p of plan.parts) {
    w.bytes(B_PARA);
    w.bytes(itemAt(pool.escapedBytes, p));
  }
}

export function sentenceOf(rng: Rng, words: number): string {
  const out: string[] = [];
  for (let k = 0; k < words; k++) out.push(rng.pick(WORDS));
  return out.join(' ');
}

export { escapeJson };
