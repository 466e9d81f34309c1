import { itemAt } from '../common/checked.ts';
import { Rng } from './prng.ts';
import { sentenceOf, topicOf } from './text.ts';

/** Shapes of the v2 API (spec §2, with the simulator's choices described in openapi.ts). */
export interface Citation {
  id: string;
  internal_id: string;
  citation_type: string;
  name: string;
  inline_offset: number;
  summary: string;
  last_updated_at: string;
  is_snippet: boolean;
  [extra: string]: unknown;
}

export interface Artifact {
  output_type: string;
  title: string;
  citations: Citation[];
  val: string;
  resolved_text_objects: boolean;
}

export interface ArtifactRef {
  artifact_id: string;
  artifact: Artifact;
}

export interface HistoryEntry {
  message_id: string;
  role: 'user' | 'assistant' | 'system';
  content: string;
  created_at: string;
  citations: Citation[];
  artifact_ids: string[];
  status: 'completed' | 'cancelled';
}

export interface CitedFile {
  file_id: string;
  file_name: string;
}

export interface ReplyDetails {
  citations: Citation[];
  artifacts: ArtifactRef[];
}

export const CANCELLED_TEXT = 'User cancelled';

/** A completed assistant entry of a thread's history (a stored reply, or a task's final message). */
export function assistantEntry(
  messageId: string,
  content: string,
  atMs: number,
  details: ReplyDetails,
): HistoryEntry {
  return {
    message_id: messageId,
    role: 'assistant',
    content,
    created_at: new Date(atMs).toISOString(),
    citations: details.citations,
    artifact_ids: details.artifacts.map((a) => a.artifact_id),
    status: 'completed',
  };
}

const hex = (rng: Rng, words: number): string => {
  let s = '';
  for (let i = 0; i < words; i++) s += rng.word().toString(16).padStart(8, '0');
  return s;
};

const SITES = ['reuters.example', 'ft.example', 'nikkei.example', 'lemonde.example', 'handelsblatt.example'];
const DOCS = [
  'Annual report 2025.pdf',
  'Investor day deck.pptx',
  'Rapport annuel — 2024.pdf',
  '決算短信 Q2.pdf',
];

function citation(rng: Rng, type: string, textLength: number, at: number, file?: CitedFile): Citation {
  const base: Citation = {
    id: `cit_${hex(rng, 2)}`,
    internal_id: `src-${hex(rng, 3)}`,
    citation_type: type,
    name: '',
    inline_offset: rng.int(textLength + 1),
    summary: sentenceOf(rng, rng.range(6, 18)),
    last_updated_at: new Date(at - rng.int(400 * 86_400_000)).toISOString(),
    is_snippet: rng.chance(0.4),
  };
  switch (type) {
    case 'custom_doc':
      base.name = file?.file_name ?? 'upload';
      base.file_id = file?.file_id ?? '';
      base.file_name = file?.file_name ?? '';
      break;
    case 'web': {
      const site = rng.pick(SITES);
      base.name = `${site} — ${topicOf(rng)}`;
      base.url = `https://${site}/a/${hex(rng, 1)}`;
      const start = rng.int(2000);
      base.snippet_start = start;
      base.snippet_end = start + rng.range(40, 400);
      break;
    }
    case 'news_development':
      base.name = `Developing: ${topicOf(rng)}`;
      base.url = `https://news.example/dev/${hex(rng, 1)}`;
      base.article_count = rng.range(1, 60);
      base.published_at = new Date(at - rng.int(30 * 86_400_000)).toISOString();
      break;
    default:
      base.name = rng.pick(DOCS);
      base.document_id = `doc_${hex(rng, 2)}`;
      base.page = rng.range(1, 240);
  }
  return base;
}

const OTHER_TYPES = ['web', 'web', 'news_development', 'document'];
const ARTIFACT_COUNTS = [0, 0, 0, 0, 1, 1, 1, 2, 2, 3];

function artifactVal(rng: Rng, type: string, title: string): string {
  if (type === 'text') return `${title || 'Note'}: ${sentenceOf(rng, rng.range(20, 60))}`;
  const n = rng.range(3, 8);
  const x = Array.from({ length: n }, (_, i) => `P${i + 1}`);
  if (type === 'table') {
    return JSON.stringify({
      columns: ['period', 'value', 'note'],
      rows: x.map((p) => [p, Math.round(rng.next() * 10_000) / 100, sentenceOf(rng, 2)]),
    });
  }
  return JSON.stringify({
    chart_type: rng.pick(['bar', 'line']),
    x,
    series: [{ name: topicOf(rng), values: x.map(() => Math.round(rng.next() * 1000) / 10) }],
  });
}

/** Citations and artifacts of one assistant reply; `seed` is the reply's own coordinate hash. */
export function replyDetails(seed: number, textLength: number, at: number, file?: CitedFile): ReplyDetails {
  const rng = new Rng(seed);
  const citations: Citation[] = [];
  if (file) citations.push(citation(rng, 'custom_doc', textLength, at, file));
  const n = rng.range(0, 5);
  for (let i = 0; i < n; i++) citations.push(citation(rng, rng.pick(OTHER_TYPES), textLength, at));
  citations.sort((a, b) => a.inline_offset - b.inline_offset);
  const artifacts: ArtifactRef[] = [];
  const k = itemAt(ARTIFACT_COUNTS, rng.int(ARTIFACT_COUNTS.length));
  for (let i = 0; i < k; i++) {
    const type = rng.pick(['text', 'table', 'chart']);
    const title = rng.chance(0.2)
      ? ''
      : `${type === 'text' ? 'Summary' : type === 'table' ? 'Table' : 'Chart'}: ${topicOf(rng)}`;
    const aCitations: Citation[] = [];
    const c = rng.range(0, 2);
    for (let j = 0; j < c; j++) {
      const cit = citation(rng, rng.pick(OTHER_TYPES), textLength, at);
      if (type !== 'text') cit.data_point = rng.int(3);
      aCitations.push(cit);
    }
    artifacts.push({
      artifact_id: `art_${hex(rng, 3)}`,
      artifact: {
        output_type: type,
        title,
        citations: aCitations,
        val: artifactVal(rng, type, title),
        resolved_text_objects: rng.chance(0.7),
      },
    });
  }
  return { citations, artifacts };
}
