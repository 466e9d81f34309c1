import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  ChildWorkflowCancellationType,
  executeChild,
  ParentClosePolicy,
  WorkflowIdReusePolicy,
} from '@temporalio/workflow';
import { addEnrich, type EnrichCounts, emptyEnrichCounts } from '../contract/counts.ts';
import { ENRICH_WORKFLOW_ID } from '../contract/workflows.ts';
import { enrichPending } from './enrich-pending.ts';
import { waiting } from './policies.ts';

/**
 * Runs the enrichment stream for a run's freshly queued threads. Only one stream runs at a time
 * (fixed id): when another run's stream is going, this run waits for it, then makes its own pass,
 * since the other stream's cursor may already be past threads this run queued.
 */
export async function runEnrich(runId: string, concurrency: number | undefined): Promise<EnrichCounts> {
  let totals = emptyEnrichCounts();
  for (let attempt = 1; ; attempt++) {
    try {
      const mine = await executeChild(enrichPending, {
        workflowId: ENRICH_WORKFLOW_ID,
        args: [{ runId, ...(concurrency ? { concurrency } : {}) }],
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
        staticSummary: 'enrich pending threads',
      });
      return addEnrich(totals, mine);
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError) || attempt >= 3) throw err;
      const theirs = await waiting.awaitEnrichWorkflow({ workflowId: ENRICH_WORKFLOW_ID, runId });
      if (theirs) totals = addEnrich(totals, theirs);
    }
  }
}
