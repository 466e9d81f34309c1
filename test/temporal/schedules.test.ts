import { ScheduleOverlapPolicy } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CrsError } from '../../src/errors.ts';
import {
  createOrUpdateSchedule,
  DEFAULT_CRON,
  deleteSchedule,
  describeSchedule,
  formatSchedule,
  pauseSchedule,
  triggerSchedule,
  unpauseSchedule,
} from '../../src/temporal/schedules.ts';
import { until } from './days.ts';
import { connectHarness, type TemporalHarness } from './harness.ts';

// The schedule functions behind `crs-sync schedule …`, against the dev server. No worker polls
// this file's task queue, so a triggered sync stays running: that is how overlap is observed.
describe('the daily schedule (dev server)', () => {
  let h: TemporalHarness;
  const id = 'crs-sync-daily-test';

  beforeAll(async () => {
    h = await connectHarness('schedules');
  });

  afterAll(async () => {
    await deleteSchedule(h.client, id).catch(() => {});
    await h?.close();
  });

  it('when the schedule is created, then it runs syncWindow daily at the cron and zone given, buffering overlaps', async () => {
    expect(
      await createOrUpdateSchedule(h.client, {
        taskQueue: h.taskQueue,
        cron: '15 2 * * *',
        timezone: 'Europe/Paris',
        catchupWindow: '6 hours',
        id,
      }),
    ).toBe('created');
    const d = await describeSchedule(h.client, id);
    expect(d.spec.timezone).toBe('Europe/Paris');
    expect(d.policies.overlap).toBe(ScheduleOverlapPolicy.BUFFER_ONE);
    expect(d.policies.catchupWindow).toBe(6 * 3600 * 1000);
    expect(d.action).toMatchObject({
      type: 'startWorkflow',
      workflowType: 'syncWindow',
      taskQueue: h.taskQueue,
    });
    expect(d.action.type === 'startWorkflow' && d.action.args).toEqual([{ kind: 'scheduled', enrich: true }]);
    const next = d.info.nextActionTimes[0];
    expect(next).toBeDefined();
    // 02:15 in Paris is 00:15 or 01:15 UTC depending on the season.
    expect(next!.getUTCMinutes()).toBe(15);
    expect([0, 1]).toContain(next!.getUTCHours());
    expect(formatSchedule(d).join('\n')).toContain('Europe/Paris');
  });

  it('when create is run again with other options, then the existing schedule is updated', async () => {
    expect(await createOrUpdateSchedule(h.client, { taskQueue: h.taskQueue, id })).toBe('updated');
    const d = await describeSchedule(h.client, id);
    expect(d.spec.timezone ?? 'UTC').toBe('UTC');
    const next = d.info.nextActionTimes[0]!;
    const [minute, hour] = DEFAULT_CRON.split(' ').map(Number);
    expect([next.getUTCHours(), next.getUTCMinutes()]).toEqual([hour, minute]);
  });

  it('when it is paused and unpaused, then describe shows the state and the note', async () => {
    await pauseSchedule(h.client, 'maintenance window', id);
    let d = await describeSchedule(h.client, id);
    expect(d.state).toMatchObject({ paused: true, note: 'maintenance window' });
    await unpauseSchedule(h.client, undefined, id);
    d = await describeSchedule(h.client, id);
    expect(d.state.paused).toBe(false);
  });

  it('when it is triggered by hand twice while a sync runs, then only one sync runs and one more waits', {
    timeout: 180_000,
  }, async () => {
    await triggerSchedule(h.client, id);
    const first = await until(
      async () => (await describeSchedule(h.client, id)).info.runningActions,
      'a run',
    );
    expect(first).toHaveLength(1);
    await triggerSchedule(h.client, id);
    await triggerSchedule(h.client, id);
    // The triggers are taken in: one waits in the buffer (BUFFER_ONE drops any on top of it).
    const d = await until(async () => {
      const x = await describeSchedule(h.client, id);
      return Number(x.raw.info?.bufferSize ?? 0) >= 1 ? x : undefined;
    }, 'the schedule to buffer a trigger');
    expect(d.info.runningActions).toHaveLength(1);
    expect(d.info.numActionsTaken).toBe(1);
    expect(Number(d.raw.info?.bufferSize ?? 0)).toBe(1);
    let running = 0;
    for await (const w of h.client.workflow.list({
      query: `WorkflowType = 'syncWindow' AND TaskQueue = '${h.taskQueue}' AND ExecutionStatus = 'Running'`,
    })) {
      if (w.workflowId) running++;
    }
    expect(running).toBe(1);
    await h.client.workflow.getHandle(d.info.runningActions[0]!.workflow.workflowId).terminate('test');
  });

  it('when it is deleted, then describing it says there is no schedule', async () => {
    await deleteSchedule(h.client, id);
    const err = await describeSchedule(h.client, id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CrsError);
    expect((err as CrsError).code).toBe('USAGE');
  });
});
