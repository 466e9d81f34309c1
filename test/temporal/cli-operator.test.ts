import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shiftDay } from '../../src/common/civil-date.ts';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { backfillWorkflowId } from '../../src/temporal/runs.ts';
import { INTRADAY_SCHEDULE_ID } from '../../src/temporal/schedules.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';
import { connectHarness, createTestWorker, type TemporalHarness } from './harness.ts';

const bin = path.resolve(import.meta.dirname, '..', '..', 'bin', 'crs-sync.js');

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The simulator's stopped clock: its data days are the five before this one. */
const NOW = '2025-06-10T12:00:00Z';
const DAYS = [1, 2, 3, 4, 5].map((n) => shiftDay('2025-06-10', -n)).reverse();

/**
 * Day workflows open at once in a run's recorded history: a day's child is open from its start
 * (initiated) to its end (completed, failed, cancelled, timed out or terminated). What
 * `--concurrency` bounds, read from what Temporal recorded rather than from timing.
 */
function mostDaysAtOnce(events: Record<string, unknown>[]): { most: number; days: string[] } {
  let open = 0;
  let most = 0;
  const days: string[] = [];
  for (const e of events) {
    const started = e.startChildWorkflowExecutionInitiatedEventAttributes as { workflowId?: string } | null;
    if (started) {
      days.push(started.workflowId ?? '');
      open += 1;
      most = Math.max(most, open);
    }
    const ended = [
      e.childWorkflowExecutionCompletedEventAttributes,
      e.childWorkflowExecutionFailedEventAttributes,
      e.childWorkflowExecutionCanceledEventAttributes,
      e.childWorkflowExecutionTimedOutEventAttributes,
      e.childWorkflowExecutionTerminatedEventAttributes,
      e.startChildWorkflowExecutionFailedEventAttributes,
    ].some((a) => a);
    if (ended) open -= 1;
  }
  return { most, days };
}

// The commands an operator runs against Temporal: the intraday schedule's create and its bounds,
// and a backfill followed to its end. The CLI as a child process, the dev server, and a worker
// (real activities, the simulator over HTTP, Postgres) in this process.
describe('the intraday schedule and a backfill, as an operator runs them (dev server, real activities)', () => {
  let h: TemporalHarness;
  let tw: TestWarehouse;
  let sim: Simulator;
  let worker: Worker;
  let running: Promise<void> | undefined;
  const cwd = mkdtempSync(path.join(tmpdir(), 'crs-cli-op-'));

  function cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        [bin, ...args],
        {
          cwd,
          env: {
            PATH: process.env.PATH,
            TEMPORAL_ADDRESS: h.address,
            TEMPORAL_NAMESPACE: h.namespace,
            TEMPORAL_TASK_QUEUE: h.taskQueue,
            DATABASE_URL: tw.url,
            CRS_SCHEMA: tw.schema,
            LOG_LEVEL: 'warn',
            ...env,
          },
          timeout: 120_000,
        },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
    });
  }

  beforeAll(async () => {
    h = await connectHarness('operator');
    tw = await createTestWarehouse({ prefix: 'tcliop' });
    sim = await startSimulator({
      port: 0,
      now: () => new Date(NOW),
      seed: 31,
      days: DAYS.length,
      recordsPerDay: 40,
      // Poison lines the service holds: the summary's rejected count has something to count.
      faults: 'poison=0.05',
    });
    worker = await createTestWorker(h, {
      warehouse: tw.w,
      env: { ...sim.env(), CRS_RATE_LIMIT_RPS: '1000' },
    });
    running = worker.run();
  });

  afterAll(async () => {
    worker?.shutdown();
    await running;
    await sim?.close();
    await tw?.dispose();
    await h?.close();
  });

  describe('schedule create --intraday', () => {
    interface Described {
      spec: { intervals: { every: number }[]; calendars?: unknown[] };
      action: { type: string; workflowType: string; workflowId: string; taskQueue: string; args: unknown[] };
      policies: { overlap: string; catchupWindow: number };
      state: { paused: boolean };
    }
    const describeIntraday = async (): Promise<Described> => {
      const d = await cli(['schedule', 'describe', '--intraday', '--json']);
      expect(d.code, d.stderr).toBe(0);
      return JSON.parse(d.stdout) as Described;
    };

    afterAll(async () => {
      await h.client.schedule
        .getHandle(INTRADAY_SCHEDULE_ID)
        .delete()
        .catch(() => {});
    });

    it('when an interval outside 5m to 12h (or not an interval) is given and no schedule exists, then create exits 2 saying the bounds, and no schedule is created', async () => {
      for (const every of ['4m', '13h', '721m', '0m', '15', '15s', '1.5h', 'soon']) {
        const r = await cli(['schedule', 'create', '--intraday', every]);
        expect([every, r.code]).toEqual([every, 2]);
        expect(r.stderr).toContain(
          `--intraday ${JSON.stringify(every)}: give an interval in minutes or hours (e.g. 15m, 1h), from 5m to 12h`,
        );
        expect(r.stdout).toBe('');
      }
      const d = await cli(['schedule', 'describe', '--intraday']);
      expect(d.code).toBe(2);
      expect(d.stderr).toContain('no schedule crs-sync-intraday');
    });

    it('when a bad interval is given, then it is refused before any connection: exit 2 even with Temporal unreachable', async () => {
      const r = await cli(['schedule', 'create', '--intraday', '3m'], { TEMPORAL_ADDRESS: '127.0.0.1:1' });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('from 5m to 12h');
    });

    it('when created with 15m, then it starts syncIntraday every 15 minutes on the task queue, with enrichment, skipping overlaps, with no catch-up', async () => {
      const r = await cli(['schedule', 'create', '--intraday', '15m']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe('schedule crs-sync-intraday created: every 15m\n');
      const d = await describeIntraday();
      expect(d.spec.intervals).toEqual([expect.objectContaining({ every: 15 * 60_000 })]);
      expect(d.spec.calendars ?? []).toEqual([]);
      expect(d.action).toMatchObject({
        type: 'startWorkflow',
        workflowType: 'syncIntraday',
        workflowId: 'crs-sync-intraday',
        taskQueue: h.taskQueue,
        args: [{ enrich: true }],
      });
      expect(d.policies).toMatchObject({ overlap: 'SKIP', catchupWindow: 60_000 });
      expect(d.state.paused).toBe(false);
      // Only the intraday schedule: the daily one is not created by it.
      const both = JSON.parse((await cli(['schedule', 'describe', '--json'])).stdout) as { daily: unknown };
      expect(both.daily).toBeNull();
    });

    it('when create is run again at the bounds, then the schedule is updated to 5m and to 12h (1h written as 60m is the same), and --no-enrich reaches its runs', async () => {
      const low = await cli(['schedule', 'create', '--intraday', '5m']);
      expect(low.stdout).toBe('schedule crs-sync-intraday updated: every 5m\n');
      expect((await describeIntraday()).spec.intervals).toEqual([
        expect.objectContaining({ every: 5 * 60_000 }),
      ]);
      const high = await cli(['schedule', 'create', '--intraday', '12h', '--no-enrich']);
      expect(high.code, high.stderr).toBe(0);
      expect(high.stdout).toBe('schedule crs-sync-intraday updated: every 12h\n');
      const d = await describeIntraday();
      expect(d.spec.intervals).toEqual([expect.objectContaining({ every: 12 * 3_600_000 })]);
      expect(d.action.args).toEqual([{ enrich: false }]);
      const text = await cli(['schedule', 'describe', '--intraday']);
      expect(text.stdout).toContain('when       every 12h, the open UTC day as a partial day');
      expect((await cli(['schedule', 'create', '--intraday', '60m'])).code).toBe(0);
      expect((await describeIntraday()).spec.intervals).toEqual([
        expect.objectContaining({ every: 3_600_000 }),
      ]);
    });

    it('when a bad interval is given while the schedule exists, then it exits 2 and the schedule keeps its interval', async () => {
      const r = await cli(['schedule', 'create', '--intraday', '13h']);
      expect(r.code).toBe(2);
      expect((await describeIntraday()).spec.intervals).toEqual([
        expect.objectContaining({ every: 3_600_000 }),
      ]);
    });
  });

  describe('backfill', () => {
    const liveRows = async (from: string, to: string) =>
      Number(
        (
          await tw.w.pool.query(
            `select count(*)::int as n from analytics_messages
             where message_date between $1 and $2 and _deleted_at is null`,
            [from, to],
          )
        ).rows[0].n,
      );
    const rejectsOf = async (from: string, to: string) =>
      Number(
        (
          await tw.w.pool.query(
            'select count(*)::int as n from rejected_records where day between $1 and $2',
            [from, to],
          )
        ).rows[0].n,
      );
    const historyOf = async (from: string, to: string) => {
      const id = backfillWorkflowId(from, to);
      const events = (await h.client.workflow.getHandle(id).fetchHistory()).events ?? [];
      return events as unknown as Record<string, unknown>[];
    };

    it('when a backfill of three days runs with --concurrency 2, then it shows progress, prints a summary whose counts are the warehouse’s, and two day workflows were open at once, never more', async () => {
      const [from, , to] = DAYS.slice(2) as [string, string, string];
      const r = await cli(['backfill', '--from', from, '--to', to, '--concurrency', '2', '--no-enrich']);
      expect(r.code, r.stderr).toBe(0);
      const id = backfillWorkflowId(from, to);
      expect(r.stderr).toContain(`backfill ${id} on task queue ${h.taskQueue}`);
      // Progress, as plain lines when stderr is not a terminal.
      expect(r.stderr).toMatch(
        /^backfill: (planning|loading|enriching|finishing|done), [0-3]\/3 days, \d+ rows$/m,
      );

      const days = DAYS.slice(2);
      const records = days.reduce((n, d) => n + sim.truth.exportDay(d).length, 0);
      const poison = days.reduce((n, d) => n + sim.truth.poisonLines(d).filter((l) => l.trim()).length, 0);
      // Every line read: the records and the poison lines.
      const read = records + poison;
      const live = await liveRows(from, to);
      expect(live).toBe(records);
      expect(poison).toBeGreaterThan(0);
      expect(await rejectsOf(from, to)).toBe(poison);
      const ledger = await tw.w.pool.query(
        `select sum(rows_inserted)::int as inserted, sum(rows_rejected)::int as rejected
         from sync_days where day between $1 and $2 and status = 'complete'`,
        [from, to],
      );
      expect(ledger.rows).toEqual([{ inserted: live, rejected: poison }]);
      expect(r.stdout).toContain(
        `backfill ${id} succeeded: ${from} → ${to}, 3 day(s) (3 loaded, 0 taken from another run, 0 failed)`,
      );
      expect(r.stdout).toContain(
        `rows: ${read} read, ${live} inserted, 0 updated, 0 unchanged, ${poison} rejected, 0 marked deleted;`,
      );
      const loadId = /^load id: (\S+)$/m.exec(r.stdout)?.[1];
      const run = await tw.w.pool.query('select kind, status from sync_runs where load_id = $1', [loadId]);
      expect(run.rows).toEqual([{ kind: 'backfill', status: 'succeeded' }]);

      const events = await historyOf(from, to);
      const started = events[0]?.workflowExecutionStartedEventAttributes as {
        input: { payloads: { data: Uint8Array }[] };
      };
      const input = JSON.parse(Buffer.from(started.input.payloads[0]!.data).toString('utf8'));
      expect(input).toMatchObject({ from, to, concurrency: 2, enrich: false });
      const { most, days: children } = mostDaysAtOnce(events);
      expect(children).toEqual(days.map((d) => `crs-sync-day-${d}`));
      expect(most).toBe(2);
    });

    it('when a backfill of two days runs with --concurrency 1, then its days were loaded one at a time', async () => {
      const [from, to] = DAYS.slice(0, 2) as [string, string];
      const r = await cli(['backfill', '--from', from, '--to', to, '--concurrency', '1', '--no-enrich']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`succeeded: ${from} → ${to}, 2 day(s) (2 loaded,`);
      const { most, days } = mostDaysAtOnce(await historyOf(from, to));
      expect(days).toHaveLength(2);
      expect(most).toBe(1);
    });

    it('when --concurrency is not a whole number from 1 to 64, then backfill exits 2 and starts nothing', async () => {
      const [from, to] = [DAYS[0]!, DAYS[4]!];
      for (const c of ['0', '65', 'two']) {
        const r = await cli(['backfill', '--from', from, '--to', to, '--concurrency', c]);
        expect([c, r.code]).toEqual([c, 2]);
        expect(r.stderr).toContain(`--concurrency: "${c}" must be a whole number from 1 to 64`);
      }
      await expect(h.client.workflow.getHandle(backfillWorkflowId(from, to)).describe()).rejects.toThrow(
        /not found/i,
      );
    });
  });
});
