import { WorkflowNotFoundError } from '@temporalio/client';
import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';
import { connectClient } from '../../temporal/connection.ts';
import { noWorkerWarning, workersPolling } from '../../temporal/pollers.ts';
import { loadContext } from '../context.ts';
import { releaseForeignExitHooks } from '../process-hooks.ts';

/**
 * `crs-sync cancel WORKFLOW_ID`: asks a run to stop, with the connection settings every other
 * command uses (API key, mTLS), so that nothing else need be installed. Temporal records the
 * request at once; a worker carries it out (the run's days stop cleanly and release the ledger),
 * so the command says when none polls the run's task queue.
 */
export function registerCancel(program: Command): void {
  program
    .command('cancel')
    .description(
      'ask a running sync, backfill or scheduled run to stop (its workflow id: printed by sync and backfill, ' +
        'kept in sync_runs.workflow_id, shown running by schedule describe); its days stop cleanly and ' +
        'release the ledger. A worker must be running to carry it out',
    )
    .argument('<workflow-id>', 'the run to cancel, e.g. crs-sync-backfill-2026-01-01-2026-01-31')
    .action(async (workflowId: string) => {
      releaseForeignExitHooks();
      const ctx = loadContext();
      const t = await connectClient(ctx.config.temporal);
      try {
        const handle = t.client.workflow.getHandle(workflowId);
        let taskQueue: string;
        try {
          const d = await handle.describe();
          if (d.status.name !== 'RUNNING') {
            throw new CrsError(
              'USAGE',
              `${workflowId} is not running (${d.status.name.toLowerCase()}): nothing to cancel`,
            );
          }
          taskQueue = d.taskQueue;
          await handle.cancel();
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) {
            throw new CrsError(
              'USAGE',
              `no workflow ${workflowId} in namespace ${ctx.config.temporal.namespace}: nothing to cancel`,
            );
          }
          throw err;
        }
        process.stdout.write(`cancellation of ${workflowId} requested\n`);
        const polling = await workersPolling(t.client, taskQueue).catch(() => undefined);
        if (polling === 0) {
          process.stderr.write(
            noWorkerWarning(taskQueue, ctx.config.temporal.namespace, `the cancellation of ${workflowId}`),
          );
        }
      } finally {
        await t.close();
      }
    });
}
