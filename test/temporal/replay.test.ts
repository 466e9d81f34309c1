import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { describe, expect, it } from 'vitest';
import { installQuietRuntime, quietLogger, workflowBundle } from './harness.ts';
import { historyFromFile } from './history-json.ts';

// Histories recorded from earlier releases of the workflows (record-histories.ts). A change to
// workflow code that running executions could not replay fails here before it is deployed.
installQuietRuntime();
const fixtures = path.join(import.meta.dirname, 'fixtures');
const dir = path.join(fixtures, 'histories');
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort();

/** Every kind of run a deploy may find in flight; a missing one would silently go untested. */
const REQUIRED = [
  'syncWindow.json',
  'syncDay.json',
  'enrichPending.json',
  'backfill-run-1.json',
  'backfill-run-2.json',
  'backfill-run-3.json',
  'scheduled-syncWindow.json',
  'cancelled-backfill.json',
  'cancelled-syncDay.json',
];

function history(file: string): unknown {
  return historyFromFile(JSON.parse(readFileSync(path.join(dir, file), 'utf8')));
}

function bundleOf(file: string) {
  return bundleWorkflowCode({ workflowsPath: path.join(fixtures, file), logger: quietLogger });
}

describe('replay of recorded histories', () => {
  it('when the fixtures are listed, then a sync, a day, an enrichment, a backfill over three runs, a scheduled run and a cancelled run are all there', () => {
    expect(files).toEqual(expect.arrayContaining(REQUIRED));
  });

  it.each(files)('when %s is replayed against the current workflow code, then it replays', async (f) => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history(f), f);
  });

  it('when a recorded day history meets code that changed the order of its steps, then non-determinism is reported', async () => {
    const changed = await bundleOf('changed-workflows.ts');
    await expect(
      Worker.runReplayHistory({ workflowBundle: changed }, history('syncDay.json'), 'syncDay'),
    ).rejects.toBeInstanceOf(DeterminismViolationError);
  });

  it('when code that changed only the cancellation path meets a finished day and a cancelled day, then only the cancelled one reports non-determinism', async () => {
    const changed = await bundleOf('changed-cancel-workflows.ts');
    // The finished day replays: the change is invisible to it, so only the cancelled history can catch it.
    await Worker.runReplayHistory({ workflowBundle: changed }, history('syncDay.json'), 'syncDay');
    await expect(
      Worker.runReplayHistory(
        { workflowBundle: changed },
        history('cancelled-syncDay.json'),
        'cancelled-syncDay',
      ),
    ).rejects.toBeInstanceOf(DeterminismViolationError);
  });
});
