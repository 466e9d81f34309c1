import { Context } from '@temporalio/activity';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import type { Activities } from '../contract/activities.ts';
import type { EnrichCounts } from '../contract/counts.ts';
import { optionalRunIdOf } from '../contract/run-id.ts';
import type { DayResult } from '../contract/workflows.ts';
import type { Liveness } from './liveness.ts';

const HEARTBEAT_EVERY_MS = 10_000;

/**
 * Waiting for another run's day load or enrichment stream (attach), with the waiting run kept
 * alive in the ledger meanwhile.
 */
export function createAwaitActivities(
  alive: Liveness,
): Pick<Activities, 'awaitDayWorkflow' | 'awaitEnrichWorkflow'> {
  const aliveOf = (runId: string | undefined) => () => {
    if (runId) alive(runId);
  };
  return {
    awaitDayWorkflow: (input) =>
      awaitWorkflowResult<DayResult>(input.workflowId, aliveOf(optionalRunIdOf(input))),
    awaitEnrichWorkflow: (input) =>
      awaitWorkflowResult<EnrichCounts>(input.workflowId, aliveOf(optionalRunIdOf(input))),
  };
}

/**
 * Follows another workflow execution (by id, across continue-as-new) until it closes, with the
 * worker's own client. Heartbeats while waiting so that cancelling the waiter is delivered and a
 * lost worker is noticed. Returns null when the execution failed, was cancelled or terminated:
 * the caller then does the work itself. `onBeat` runs with every heartbeat (the waiting run's
 * sign of life in the ledger).
 */
export async function awaitWorkflowResult<T>(workflowId: string, onBeat?: () => void): Promise<T | null> {
  const ctx = Context.current();
  const handle = ctx.client.workflow.getHandle<() => Promise<T>>(workflowId);
  const beat = () => {
    ctx.heartbeat({ waitingFor: workflowId });
    onBeat?.();
  };
  const timer = setInterval(beat, HEARTBEAT_EVERY_MS);
  beat();
  try {
    const result = await Promise.race([
      handle.result(),
      new Promise<never>((_, reject) => {
        ctx.cancellationSignal.addEventListener('abort', () => reject(ctx.cancellationSignal.reason), {
          once: true,
        });
      }),
    ]);
    return result;
  } catch (err) {
    if (err instanceof WorkflowFailedError || err instanceof WorkflowNotFoundError) return null;
    throw err;
  } finally {
    clearInterval(timer);
  }
}
