import type pg from 'pg';

/** Milliseconds of `runs` runs of `fn`; the first result is returned with them. */
export async function timeRuns<T>(runs: number, fn: () => Promise<T>): Promise<{ ms: number[]; result: T }> {
  const ms: number[] = [];
  let result: T | undefined;
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const r = await fn();
    ms.push(performance.now() - t0);
    if (i === 0) result = r;
  }
  return { ms, result: result as T };
}

export const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};

export const best = (xs: number[]): number => Math.min(...xs);

/**
 * Runs `fn` on a client inside a transaction that flags the rollups for a rebuild, then rolls
 * back: every BI view then reads its raw-table branch (a marked day alone no longer does it:
 * daily_usage reads the raw rows of the marked days only), and nothing is left behind.
 */
export async function withRawViews<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('begin');
    await c.query('set local statement_timeout = 0');
    await c.query('update rollup_state set rebuild_needed = true');
    return await fn(c);
  } finally {
    await c.query('rollback');
    c.release();
  }
}

export function fmtMs(ms: number): string {
  if (ms >= 10_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
}

export function table(head: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}
