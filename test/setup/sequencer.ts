import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The system files `npm test` starts first, in this order. scripts/test.ts runs the system tier
 * beside the unit and integration tiers, which share the 2 cores with it for their first minutes.
 * These three wait on progress they make at their own pace (the chaos harness's quotas, the churn
 * test's budget of 50 requests a second, worker-kill's retries). Left to vitest's order (on a
 * fresh clone, the largest file first), files that time CLI processes and alert checks ran in that
 * window at up to twice their time. Sharing is not free for these three either: beside one file at
 * a time of the other tiers (CRS_TEST_WORKERS=1) chaos took 116 s and churn 87 s in one run,
 * against about 90 and 56 s alone, and worker-kill 85 s; another order has not been measured.
 */
export const SYSTEM_FIRST: readonly string[] = [
  'test/chaos/chaos.test.ts',
  'test/temporal/churn.test.ts',
  'test/temporal/worker-kill.test.ts',
];

/** vitest's order (failed first, then slowest, or largest without a cache), SYSTEM_FIRST first. */
export class SystemFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification) => {
      const i = SYSTEM_FIRST.findIndex((p) => f.moduleId.endsWith(`/${p}`));
      return i < 0 ? SYSTEM_FIRST.length : i;
    };
    // A stable sort: every other file keeps vitest's place.
    return sorted
      .map((f, i) => ({ f, i }))
      .sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i)
      .map((x) => x.f);
  }
}
