import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { describe, expect, it } from 'vitest';
import { quietLogger, workflowBundle } from './harness.ts';
import { historyFromFile } from './history-json.ts';

// Histories recorded from earlier versions of the workflows (record-histories.ts). A change to
// workflow code that running executions could not replay fails here before it is deployed.
const dir = path.join(import.meta.dirname, 'fixtures', 'histories');
const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

function history(file: string): unknown {
  return historyFromFile(JSON.parse(readFileSync(path.join(dir, file), 'utf8')));
}

describe('replay of recorded histories', () => {
  it('when the recorded histories are replayed against the current workflow code, then every one replays', async () => {
    expect(files.length).toBeGreaterThanOrEqual(6);
    const bundle = await workflowBundle();
    for (const f of files) {
      await Worker.runReplayHistory({ workflowBundle: bundle }, history(f), f);
    }
  });

  it('when a recorded day history meets code that changed the order of its steps, then non-determinism is reported', async () => {
    const changed = await bundleWorkflowCode({
      workflowsPath: path.join(import.meta.dirname, 'fixtures', 'changed-workflows.ts'),
      logger: quietLogger,
    });
    await expect(
      Worker.runReplayHistory({ workflowBundle: changed }, history('syncDay.json'), 'syncDay'),
    ).rejects.toBeInstanceOf(DeterminismViolationError);
  });
});
