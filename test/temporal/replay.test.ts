import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { describe, expect, it } from 'vitest';
import { ACTIVITY_NAMES } from '../../contract/activities.ts';
import { type RunRef, runIdOf } from '../../contract/run-id.ts';
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
  'syncIntraday.json',
  'intraday-syncDay.json',
];

function history(file: string): unknown {
  return historyFromFile(JSON.parse(readFileSync(path.join(dir, file), 'utf8')));
}

/** The activity types a recorded history schedules, local activities (markers) included. */
function activityTypes(file: string): string[] {
  const json = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as {
    events: Record<string, unknown>[];
  };
  const types: string[] = [];
  for (const e of json.events) {
    const scheduled = e.activityTaskScheduledEventAttributes as
      | { activityType: { name: string } }
      | undefined;
    if (scheduled) types.push(scheduled.activityType.name);
    const marker = e.markerRecordedEventAttributes as
      | { markerName: string; details: { data: { payloads: { data: string }[] } } }
      | undefined;
    if (marker?.markerName === 'core_local_activity') {
      for (const p of marker.details.data.payloads) {
        types.push(
          (JSON.parse(Buffer.from(p.data, 'base64').toString('utf8')) as { activity_type: string })
            .activity_type,
        );
      }
    }
  }
  return types;
}

type Attributes = Record<string, { name?: string } | { payloads?: { data: string }[] } | undefined>;

/**
 * The payloads of a recorded history that carry a run id: where they sit (event, and the
 * workflow or activity type) and what they hold, decoded.
 */
function runIdPayloads(file: string): { where: string; value: Record<string, unknown> }[] {
  const json = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as {
    events: Record<string, Attributes>[];
  };
  const out: { where: string; value: Record<string, unknown> }[] = [];
  for (const e of json.events) {
    for (const [event, a] of Object.entries(e)) {
      if (!event.endsWith('EventAttributes') || typeof a !== 'object' || a === null) continue;
      const type = ((a.activityType ?? a.workflowType) as { name?: string } | undefined)?.name ?? '';
      const held = (a.input ?? a.result) as { payloads?: { data?: string }[] } | undefined;
      for (const p of held?.payloads ?? []) {
        // A null or void payload has no data.
        if (typeof p.data !== 'string') continue;
        const value = JSON.parse(Buffer.from(p.data, 'base64').toString('utf8')) as unknown;
        if (typeof value !== 'object' || value === null) continue;
        const v = value as Record<string, unknown>;
        // A backfill continued as new holds its run id in its state.
        for (const x of [v, v.state]) {
          if (typeof x === 'object' && x !== null && ('loadId' in x || 'runId' in x))
            out.push({
              where: `${event.replace('EventAttributes', '')} ${type}`.trim(),
              value: x as Record<string, unknown>,
            });
        }
      }
    }
  }
  return out;
}

function bundleOf(file: string) {
  return bundleWorkflowCode({ workflowsPath: path.join(fixtures, file), logger: quietLogger });
}

describe('replay of recorded histories', () => {
  it('when the fixtures are listed, then a sync, a day, an enrichment, a backfill over three runs, a scheduled run, a cancelled run and an intraday run (with its partial day) are all there', () => {
    expect(files).toEqual(expect.arrayContaining(REQUIRED));
  });

  it('when the recorded histories are read, then every activity they schedule is one the contract names', () => {
    const recorded = new Set(files.flatMap(activityTypes));
    // Enough of them to mean something: plain and local activities of every kind of run.
    expect([...recorded]).toEqual(expect.arrayContaining(['loadExportDay', 'beginRun', 'dayLoadedSince']));
    expect([...recorded].filter((t) => !(ACTIVITY_NAMES as readonly string[]).includes(t))).toEqual([]);
  });

  it('when the recorded payloads that carry a run id are read, then each yields it under its recorded name, loadId', () => {
    const found = files.flatMap(runIdPayloads);
    const where = new Set(found.map((f) => f.where));
    // The inputs this release reads a run id from (workflow starts, a backfill's state carried
    // over continue-as-new, the ledger and enrichment activities) and the results clients read.
    expect([...where]).toEqual(
      expect.arrayContaining([
        'workflowExecutionStarted enrichPending',
        'workflowExecutionStarted backfill',
        'workflowExecutionContinuedAsNew backfill',
        'activityTaskScheduled beginRun',
        'activityTaskScheduled endRun',
        'activityTaskScheduled enrichThreads',
        'workflowExecutionCompleted',
      ]),
    );
    for (const f of found) {
      expect(typeof f.value.loadId, f.where).toBe('string');
      expect(runIdOf(f.value as unknown as RunRef), f.where).toBe(f.value.loadId);
    }
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

  it('when the recorded intraday run is read, then it pulled the closed day and then the open day as a partial day, and enriched', () => {
    const json = JSON.parse(readFileSync(path.join(dir, 'syncIntraday.json'), 'utf8')) as {
      events: Record<string, unknown>[];
    };
    const children = json.events
      .map((e) => e.startChildWorkflowExecutionInitiatedEventAttributes as { workflowId: string } | undefined)
      .filter((a) => a !== undefined)
      .map((a) => a.workflowId);
    expect(children).toEqual(['crs-sync-day-2024-04-01', 'crs-sync-day-2024-04-02', 'crs-sync-enrich']);
    const day = JSON.parse(readFileSync(path.join(dir, 'intraday-syncDay.json'), 'utf8')) as {
      events: { workflowExecutionStartedEventAttributes?: { input: { payloads: { data: string }[] } } }[];
    };
    const input = day.events[0]?.workflowExecutionStartedEventAttributes?.input.payloads[0]?.data ?? '';
    expect(JSON.parse(Buffer.from(input, 'base64').toString('utf8'))).toMatchObject({
      day: '2024-04-02',
      partial: true,
    });
  });

  it('when the recorded intraday run meets code that no longer pulls the closed day, then non-determinism is reported', async () => {
    const changed = await bundleOf('changed-intraday-workflows.ts');
    await expect(
      Worker.runReplayHistory({ workflowBundle: changed }, history('syncIntraday.json'), 'syncIntraday'),
    ).rejects.toBeInstanceOf(DeterminismViolationError);
  });
});
