import { describe, expect, it } from 'vitest';
import { addDay, emptyTotals } from '../../contract/counts.ts';
import type { DayResult } from '../../contract/workflows.ts';

const day = (outcome: DayResult['outcome'], n: number): DayResult => ({
  day: '2026-11-01',
  runId: 'run-1',
  outcome,
  linesRead: n,
  bytesRead: 10 * n,
  rowsRead: n,
  inserted: n,
  updated: 0,
  unchanged: 0,
  rejected: 1,
  suppressed: 0,
  deleted: 0,
  threadsQueued: 2,
});

describe("a run's totals", () => {
  it('when a loaded and an attached day are added, then only the loaded day counts rows and each outcome is counted once', () => {
    const start = emptyTotals();
    const t = addDay(addDay(start, day('loaded', 5)), day('attached', 7));
    // The attached day's rows are the other run's: counted there, not here again.
    expect(t).toEqual({
      linesRead: 5,
      bytesRead: 50,
      rowsRead: 5,
      inserted: 5,
      updated: 0,
      unchanged: 0,
      rejected: 1,
      suppressed: 0,
      deleted: 0,
      threadsQueued: 2,
      daysLoaded: 1,
      daysAttached: 1,
      daysFailed: 0,
    });
    // The totals a workflow published before stay as they were.
    expect(start).toEqual(emptyTotals());
  });

  it('when totals recorded by an older history lack a count, then adding a day still gives numbers', () => {
    const { threadsQueued: _dropped, ...old } = emptyTotals();
    const t = addDay(old as ReturnType<typeof emptyTotals>, day('loaded', 3));
    expect(t.threadsQueued).toBe(2);
    expect(Object.values(t).every(Number.isFinite)).toBe(true);
  });
});
