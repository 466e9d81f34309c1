/**
 * Measures the alternative to the warehouse row (docs/decisions/0009): the budget as a Temporal
 * workflow, each lease an Update, on the Temporal CLI's dev server. Not a test.
 *
 *   TEMPORAL_CLI_PATH=… node test/api/helpers/budget-temporal-measure.ts
 */
import os from 'node:os';
import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { lease } from './budget-temporal-workflow.ts';

const leases = Number(process.env.LEASES ?? 300);
const cli = process.env.TEMPORAL_CLI_PATH;
const env = await TestWorkflowEnvironment.createLocal({
  server: { ...(cli ? { executable: { type: 'existing-path' as const, path: cli } } : {}), ip: '127.0.0.1' },
});
const worker = await Worker.create({
  connection: env.nativeConnection,
  taskQueue: 'budget-measure',
  workflowsPath: path.join(import.meta.dirname, 'budget-temporal-workflow.ts'),
});
await worker.runUntil(async () => {
  const h = await env.client.workflow.start('budgetWorkflow', {
    taskQueue: 'budget-measure',
    workflowId: 'budget',
  });
  const times: number[] = [];
  // Three callers at once, like three workers leasing.
  await Promise.all(
    [0, 1, 2].map(async () => {
      for (let i = 0; i < leases / 3; i++) {
        const t = performance.now();
        await h.executeUpdate(lease, { args: [13, 50, 1075] });
        times.push(performance.now() - t);
      }
    }),
  );
  times.sort((a, b) => a - b);
  const pct = (p: number) => Number((times[Math.floor(p * (times.length - 1))] ?? 0).toFixed(1));
  const d = await h.describe();
  console.log(
    JSON.stringify({
      load: os.loadavg().map((x) => Number(x.toFixed(2))),
      leases: times.length,
      updateMsP50: pct(0.5),
      updateMsP99: pct(0.99),
      historyEvents: d.historyLength,
      historyBytes: d.raw.workflowExecutionInfo?.historySizeBytes?.toString(),
    }),
  );
  await h.terminate();
});
await env.teardown();
