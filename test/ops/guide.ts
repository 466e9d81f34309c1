/**
 * The blocks of docs/operations.md's "One machine, no Docker, step by step", as the guide's own
 * test reads them: `sh run:NAME` blocks (run in order in one shell), `sh not-run:NAME` blocks
 * (held by their text) and `text` samples (what the run block before them prints).
 */

export const GUIDE_HEADING = '## One machine, no Docker, step by step';

export interface RunStep {
  name: string;
  script: string;
  /** The lines of the `text` samples after the block; `…` stands for any text. */
  sample: string[];
}

export interface Guide {
  steps: RunStep[];
  notRun: Map<string, string>;
}

/** The section from its heading to the next `## ` heading; an error when it is not there. */
export function guideSection(doc: string): string {
  const start = doc.indexOf(`\n${GUIDE_HEADING}\n`);
  if (start < 0) throw new Error(`docs/operations.md has no "${GUIDE_HEADING}" section`);
  const rest = doc.slice(start + 1);
  const end = rest.indexOf('\n## ', GUIDE_HEADING.length);
  return end < 0 ? rest : rest.slice(0, end + 1);
}

/**
 * The section's fenced blocks. Every fence must be one of the three kinds, and a sample must
 * follow a run block: anything else is an error, so a block the test would not run (or check)
 * cannot enter the guide unseen.
 */
export function parseGuide(section: string): Guide {
  const steps: RunStep[] = [];
  const notRun = new Map<string, string>();
  const lines = section.split('\n');
  let last: 'run' | 'other' = 'other';
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(.*)$/.exec(lines[i] ?? '');
    if (!open) continue;
    const info = (open[1] ?? '').trim();
    const body: string[] = [];
    for (i++; i < lines.length && lines[i] !== '```'; i++) body.push(lines[i] ?? '');
    if (i >= lines.length) throw new Error(`an unclosed block: \`\`\`${info}`);
    const text = body.join('\n');
    const run = /^sh run:([a-z-]+)$/.exec(info);
    const skipped = /^sh not-run:([a-z-]+)$/.exec(info);
    if (run) {
      steps.push({ name: run[1]!, script: text, sample: [] });
      last = 'run';
    } else if (skipped) {
      notRun.set(skipped[1]!, text);
      last = 'other';
    } else if (info === 'text') {
      const step = steps.at(-1);
      if (last !== 'run' || !step) throw new Error('a text sample that follows no run block');
      step.sample.push(...body.filter((l) => l.trim() !== ''));
      last = 'other';
    } else {
      throw new Error(`a block of an unknown kind in the guide: \`\`\`${info}`);
    }
  }
  return { steps, notRun };
}

/** A sample line as a pattern of a whole output line: `…` any text, runs of white space any. */
export function sampleLine(line: string): RegExp {
  const parts = line.trim().split(/(…|\s+)/);
  const body = parts
    .map((p) => (p === '…' ? '.*' : /^\s+$/.test(p) ? '\\s+' : p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${body}$`);
}

/** The sample lines no line of `output` matches. */
export function unmatchedSample(sample: readonly string[], output: string): string[] {
  const outLines = output.split('\n').map((l) => l.trim());
  return sample.filter((s) => {
    const re = sampleLine(s);
    return !outLines.some((l) => re.test(l));
  });
}

/** The variables the settings block exports, in order. */
export function exportedNames(script: string): string[] {
  const names: string[] = [];
  for (const line of script.split('\n')) {
    const m = /^export\s+(.*)$/.exec(line.trim());
    if (!m) continue;
    for (const a of (m[1] ?? '').matchAll(/(?:^|\s)([A-Z_][A-Z0-9_]*)=/g)) names.push(a[1]!);
  }
  return names;
}
