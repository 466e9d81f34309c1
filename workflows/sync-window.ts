import { patched, uuid4, workflowInfo } from '@temporalio/workflow';
import { closedDayLoad } from '../contract/load-target.ts';
import type { SyncResult, SyncWindowInput } from '../contract/workflows.ts';
import { runBounded } from './bounded.ts';
import { endRunWithResult } from './finish.ts';
import { ledger, upkeep } from './policies.ts';
import { openProgress, runSkeleton } from './run-skeleton.ts';
import { loadDayInto } from './run-state.ts';

/**
 * A sync of a window of days: by default planned from the ledger (watermark minus the lookback,
 * to yesterday UTC, as of the workflow's start time, which for a schedule is the scheduled
 * time), else the explicit dates. Each day is a child `syncDay`; then the queued threads are
 * enriched.
 */
export async function syncWindow(input: SyncWindowInput): Promise<SyncResult> {
  const p = openProgress({
    kind: input.kind,
    runId: uuid4(),
    from: input.from ?? null,
    to: input.to ?? null,
  });
  const plan = await ledger.planSyncWindow({
    ...(input.from ? { from: input.from } : {}),
    ...(input.to ? { to: input.to } : {}),
    now: new Date().toISOString(),
  });
  p.from = plan.from;
  p.to = plan.to;
  p.daysTotal = plan.days.length;
  const since = workflowInfo().startTime.toISOString();
  return runSkeleton(p, {
    load: async () => {
      await runBounded(plan.days, input.concurrency ?? 2, (day) =>
        loadDayInto(p, closedDayLoad(p.runId, day), since, input),
      );
      return plan.days.length > 0;
    },
    enrichConcurrency: input.enrich !== false ? async () => plan.enrichConcurrency : null,
    finish: async () => {
      // The daily run sweeps text past CRS_TEXT_RETENTION_DAYS (docs/privacy.md) once its days are
      // loaded. Patched: a run recorded before the sweep existed replays without it. A failed sweep
      // fails nothing that loaded; the worker logged it and the next daily run sweeps again.
      if (input.kind === 'scheduled' && patched('text-retention-sweep')) {
        await upkeep.sweepRetainedText().catch(() => undefined);
      }
      return endRunWithResult(p);
    },
  });
}
