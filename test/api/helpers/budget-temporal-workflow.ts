import { condition, defineUpdate, setHandler } from '@temporalio/workflow';

/**
 * The alternative measured in docs/decisions/0009: the budget as a Temporal workflow, each
 * lease an Update. Workflow time is the task's time, so the window is counted on it.
 */
export const lease = defineUpdate<number, [number, number, number]>('lease');

export async function budgetWorkflow(): Promise<void> {
  const blocks: Array<{ at: number; n: number }> = [];
  setHandler(lease, (want, limit, windowMs) => {
    const t = Date.now();
    while (blocks.length > 0 && (blocks[0]?.at ?? t) <= t - windowMs) blocks.shift();
    const used = blocks.reduce((a, b) => a + b.n, 0);
    const take = Math.max(0, Math.min(want, limit - used));
    if (take > 0) blocks.push({ at: t, n: take });
    return take;
  });
  await condition(() => false);
}
