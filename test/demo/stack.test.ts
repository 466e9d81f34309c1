import { describe, expect, it } from 'vitest';
import { Stack } from '../../src/demo/stack.ts';

describe('demo Stack', () => {
  it('when stopped, then parts stop in reverse order of start', async () => {
    const order: string[] = [];
    const s = new Stack(() => {});
    for (const name of ['warehouse', 'simulator', 'temporal', 'worker']) {
      s.add(name, async () => {
        order.push(name);
      });
    }
    await s.stop();
    expect(order).toEqual(['worker', 'temporal', 'simulator', 'warehouse']);
  });

  it('when one part fails or hangs, then it is reported and the parts before it still stop', async () => {
    const reports: string[] = [];
    const stopped: string[] = [];
    const s = new Stack((line) => reports.push(line));
    s.add('warehouse', async () => {
      stopped.push('warehouse');
    });
    s.add('stuck', () => new Promise<void>(() => {}));
    s.add('broken', async () => {
      throw new Error('boom');
    });
    await s.stop(50);
    expect(stopped).toEqual(['warehouse']);
    expect(reports).toEqual([
      'could not stop broken: boom',
      'could not stop stuck: did not stop within 50 ms',
    ]);
  });

  it('when stop is called twice (Ctrl-C during the clean-up), then each part stops once', async () => {
    let n = 0;
    const s = new Stack(() => {});
    s.add('worker', async () => {
      n++;
    });
    await Promise.all([s.stop(), s.stop()]);
    expect(n).toBe(1);
  });
});
