import { type ContestResult, isOutcome, type Outcome, rowsPerS } from './outcome.ts';

/** Plain-text tables: first column left-aligned, the rest right-aligned. */
export function table(head: string[], rows: string[][]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(w[i]!) : c.padStart(w[i]!))).join('  ');
  return [line(head), w.map((n) => '-'.repeat(n)).join('  '), ...rows.map(line)].join('\n');
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const fix = (n: number | null, d = 1) => (n === null || !Number.isFinite(n) ? '-' : n.toFixed(d));

export function comparison(results: ContestResult[], reference: Outcome | null): string {
  const rows = results.map((r) => {
    if (!isOutcome(r)) return [r.name, 'skipped', '', '', '', '', '', ''];
    const ratio = reference ? `${fix(rowsPerS(r) / rowsPerS(reference), 2)}x` : '-';
    return [
      r.name,
      int(r.rows),
      fix(r.seconds),
      int(rowsPerS(r)),
      fix(r.bytes / 1e6 / r.seconds),
      fix(r.peakRssMb),
      ratio,
      fix(r.wallS),
    ];
  });
  return table(
    [
      'contestant',
      'rows',
      'seconds',
      'rows/s',
      'MB/s',
      'peak RSS MB',
      'rows/s vs our first load',
      'wall s (incl. start-up)',
    ],
    rows,
  );
}

/** Where the CPU went: the contestant's own process vs the PostgreSQL server (2 cores = 200%). */
export function cpuTable(results: ContestResult[]): string {
  const rows = results.filter(isOutcome).map((r) => {
    const pct = (s: number | null) => (s === null ? '-' : `${Math.round((100 * s) / r.wallS)}%`);
    return [r.name, fix(r.wallS), fix(r.cpuS), pct(r.cpuS), fix(r.pgCpuS), pct(r.pgCpuS)];
  });
  return table(
    ['contestant', 'wall s', 'client CPU s', 'client CPU', 'postgres CPU s', 'postgres CPU'],
    rows,
  );
}

export function notes(results: ContestResult[]): string {
  const out: string[] = [];
  for (const r of results) {
    if (!isOutcome(r)) out.push(`- ${r.name}: skipped: ${r.reason}`);
    else for (const n of r.notes) out.push(`- ${r.name}: ${n}`);
  }
  return out.join('\n');
}

export interface Check {
  what: string;
  value: string;
  target: string;
  ok: boolean | null;
}

export function checks(list: Check[]): string {
  return table(
    ['target', 'measured', 'wanted', 'result'],
    list.map((c) => [c.what, c.value, c.target, c.ok === null ? 'n/a' : c.ok ? 'PASS' : 'FAIL']),
  );
}
