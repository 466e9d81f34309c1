import { describe, expect, it } from 'vitest';
import {
  closedDayLoad,
  dayLoadOf,
  exportDayOf,
  fileLoad,
  loadIdOf,
  openDayLoad,
  sourceNameOf,
  sourceOf,
  wholeDaysOf,
} from '../../src/common/load-target.ts';

describe('a load target', () => {
  it('when a closed day is loaded, then its load id is the run id and the day, and the day is whole', () => {
    const t = closedDayLoad('run-1', '2026-11-20');
    expect(loadIdOf(t)).toBe('run-1:2026-11-20');
    expect(exportDayOf(t)).toBe('2026-11-20');
    expect(wholeDaysOf(t)).toEqual({ from: '2026-11-20', to: '2026-11-20' });
    expect([sourceOf(t), sourceNameOf(t)]).toEqual(['export', 'export:2026-11-20']);
  });

  it('when the open day is pulled, then it has the same load id as a closed day of the run, and no whole day', () => {
    const t = openDayLoad('run-2', '2026-11-21');
    expect(loadIdOf(t)).toBe('run-2:2026-11-21');
    expect(exportDayOf(t)).toBe('2026-11-21');
    expect(wholeDaysOf(t)).toBeNull();
    expect(sourceNameOf(t)).toBe('export:2026-11-21');
  });

  it('when a file is imported, then its load id is its run id, it has no export day, and its whole days are the declared ones', () => {
    const t = fileLoad('import-abc', '/data/week.jsonl', { from: '2026-11-14', to: '2026-11-20' });
    expect(loadIdOf(t)).toBe('import-abc');
    expect(exportDayOf(t)).toBeNull();
    expect(wholeDaysOf(t)).toEqual({ from: '2026-11-14', to: '2026-11-20' });
    expect([sourceOf(t), sourceNameOf(t)]).toEqual(['file', '/data/week.jsonl']);
    expect(wholeDaysOf(fileLoad('import-abc', 'stdin'))).toBeNull();
  });

  it('when a day workflow input recorded before load targets is read, then it is the same day load', () => {
    expect(dayLoadOf({ day: '2026-11-20', loadId: 'run-1' })).toEqual(closedDayLoad('run-1', '2026-11-20'));
    expect(dayLoadOf({ day: '2026-11-21', loadId: 'run-2', partial: true })).toEqual(
      openDayLoad('run-2', '2026-11-21'),
    );
    const target = openDayLoad('run-3', '2026-11-22');
    expect(dayLoadOf({ target })).toEqual(target);
  });

  it('when an input is neither shape, then it is refused by name', () => {
    expect(() => dayLoadOf({ day: '2026-11-20' } as never)).toThrow(/not a day load/);
  });
});
