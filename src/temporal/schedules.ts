import {
  type Client,
  ScheduleAlreadyRunning,
  type ScheduleDescription,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
} from '@temporalio/client';
import { syncIntraday, syncWindow } from '../../workflows/index.ts';
import { CLOSED_DAY_AFTER_MS } from '../../workflows/sync-intraday.ts';
import { CrsError } from '../errors.ts';

export const SCHEDULE_ID = 'crs-sync-daily';
/** Workflow id prefix of scheduled runs (Temporal appends the scheduled time). */
export const SCHEDULED_WORKFLOW_ID = 'crs-sync-scheduled';
/** 00:30 UTC: the previous UTC day is closed and its export complete. */
export const DEFAULT_CRON = '30 0 * * *';
export const DEFAULT_TIMEZONE = 'UTC';
export const DEFAULT_CATCHUP_WINDOW = '1 day';

/**
 * BUFFER_ONE: a run that comes due (or is triggered by hand) while a sync is still running waits
 * for it and then runs, so two syncs never overlap and a requested sync is not silently dropped;
 * further requests while one is buffered are dropped (one more run covers them: the window is
 * planned from the ledger when the run starts).
 */
export const OVERLAP_POLICY = ScheduleOverlapPolicy.BUFFER_ONE;

export const INTRADAY_SCHEDULE_ID = 'crs-sync-intraday';
/** Workflow id prefix of intraday runs (Temporal appends the scheduled time). */
export const INTRADAY_WORKFLOW_ID = 'crs-sync-intraday';

/**
 * SKIP for intraday runs: a pull due while the previous one still runs is dropped, since the
 * next one reads the whole open day again anyway.
 */
export const INTRADAY_OVERLAP_POLICY = ScheduleOverlapPolicy.SKIP;

const MIN_INTRADAY_MINUTES = 5;
const MAX_INTRADAY_MINUTES = 12 * 60;

/**
 * The interval of `--intraday EVERY`: minutes (`15m`) or hours (`1h`), from 5 minutes to 12
 * hours (more often would spend the export's budget re-reading the day; less is the daily pull).
 */
export function parseIntradayEvery(every: string): { text: string; minutes: number } {
  const m = /^(\d{1,4})(m|h)$/.exec(every.trim());
  const minutes = m ? Number(m[1]) * (m[2] === 'h' ? 60 : 1) : Number.NaN;
  if (!(minutes >= MIN_INTRADAY_MINUTES && minutes <= MAX_INTRADAY_MINUTES)) {
    throw new CrsError(
      'USAGE',
      `--intraday ${JSON.stringify(every)}: give an interval in minutes or hours (e.g. 15m, 1h), from ${MIN_INTRADAY_MINUTES}m to ${MAX_INTRADAY_MINUTES / 60}h`,
    );
  }
  return { text: `${minutes}m`, minutes };
}

export interface IntradayScheduleOptions {
  taskQueue: string;
  /** `15m`, `1h` (parseIntradayEvery). */
  every: string;
  enrich?: boolean;
  /** Another schedule id (tests); default INTRADAY_SCHEDULE_ID. */
  id?: string;
}

/**
 * Creates the intraday schedule (pulls of the open UTC day every `every`, and the day that just
 * closed once after 00:30 UTC: workflows/sync-intraday.ts), or brings it to these options.
 */
export async function createOrUpdateIntradaySchedule(
  client: Client,
  o: IntradayScheduleOptions,
): Promise<'created' | 'updated'> {
  const every = parseIntradayEvery(o.every);
  const spec = { intervals: [{ every: every.text }] };
  const action = {
    type: 'startWorkflow' as const,
    workflowType: syncIntraday,
    workflowId: INTRADAY_WORKFLOW_ID,
    taskQueue: o.taskQueue,
    args: [{ enrich: o.enrich ?? true }] as [Parameters<typeof syncIntraday>[0]],
    staticSummary: `intraday crs-sync every ${o.every}`,
  };
  // A missed pull is not worth catching up: the next one reads the whole open day.
  const policies = { overlap: INTRADAY_OVERLAP_POLICY, catchupWindow: '1 minute' };
  const id = o.id ?? INTRADAY_SCHEDULE_ID;
  try {
    await client.schedule.create({ scheduleId: id, spec, action, policies });
    return 'created';
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  await client.schedule.getHandle(id).update((prev) => ({ ...prev, spec, action, policies }));
  return 'updated';
}

export interface ScheduleOptions {
  taskQueue: string;
  cron?: string;
  timezone?: string;
  catchupWindow?: string;
  enrich?: boolean;
  /** Another schedule id (tests); default SCHEDULE_ID. */
  id?: string;
}

function createHow(id: string): string {
  return id === INTRADAY_SCHEDULE_ID
    ? 'crs-sync schedule create --intraday EVERY'
    : 'crs-sync schedule create';
}

function notFound(id: string): CrsError {
  return new CrsError('USAGE', `no schedule ${id}: create it with \`${createHow(id)}\``);
}

async function orNotFound<T>(id: string, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) throw notFound(id);
    throw err;
  }
}

/** Creates the daily schedule, or brings an existing one to these options (idempotent for deploys). */
export async function createOrUpdateSchedule(
  client: Client,
  o: ScheduleOptions,
): Promise<'created' | 'updated'> {
  const spec = { cronExpressions: [o.cron ?? DEFAULT_CRON], timezone: o.timezone ?? DEFAULT_TIMEZONE };
  const action = {
    type: 'startWorkflow' as const,
    workflowType: syncWindow,
    workflowId: SCHEDULED_WORKFLOW_ID,
    taskQueue: o.taskQueue,
    args: [{ kind: 'scheduled' as const, enrich: o.enrich ?? true }] as [Parameters<typeof syncWindow>[0]],
    staticSummary: 'daily crs-sync',
  };
  const policies = { overlap: OVERLAP_POLICY, catchupWindow: o.catchupWindow ?? DEFAULT_CATCHUP_WINDOW };
  try {
    await client.schedule.create({ scheduleId: o.id ?? SCHEDULE_ID, spec, action, policies });
    return 'created';
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  await client.schedule
    .getHandle(o.id ?? SCHEDULE_ID)
    .update((prev) => ({ ...prev, spec, action, policies }));
  return 'updated';
}

export function describeSchedule(client: Client, id = SCHEDULE_ID): Promise<ScheduleDescription> {
  return orNotFound(id, () => client.schedule.getHandle(id).describe());
}

export function pauseSchedule(
  client: Client,
  note = 'paused with crs-sync schedule pause',
  id = SCHEDULE_ID,
): Promise<void> {
  return orNotFound(id, () => client.schedule.getHandle(id).pause(note));
}

export function unpauseSchedule(
  client: Client,
  note = 'unpaused with crs-sync schedule unpause',
  id = SCHEDULE_ID,
): Promise<void> {
  return orNotFound(id, () => client.schedule.getHandle(id).unpause(note));
}

/** A run now, under the same overlap policy as the scheduled ones. */
export function triggerSchedule(client: Client, id = SCHEDULE_ID): Promise<void> {
  const policy = id === INTRADAY_SCHEDULE_ID ? INTRADAY_OVERLAP_POLICY : OVERLAP_POLICY;
  return orNotFound(id, () => client.schedule.getHandle(id).trigger(policy));
}

export function deleteSchedule(client: Client, id = SCHEDULE_ID): Promise<void> {
  return orNotFound(id, () => client.schedule.getHandle(id).delete());
}

interface DescribedRange {
  start: unknown;
  end?: unknown;
  step?: number;
}

/** One calendar field in cron style: `*`, `3`, `1-5`, `0-59/15`. */
function field(ranges: readonly DescribedRange[] | undefined, full: [unknown, unknown]): string {
  if (!ranges || ranges.length === 0) return '*';
  const only = ranges.length === 1 ? ranges[0] : undefined;
  if (only && only.start === full[0] && only.end === full[1] && (only.step ?? 1) === 1) return '*';
  return ranges
    .map((r) => {
      const span = r.end === undefined || r.end === r.start ? String(r.start) : `${r.start}-${r.end}`;
      return r.step && r.step > 1 ? `${span}/${r.step}` : span;
    })
    .join(',');
}

/** An interval as it was given: `15m`, `1h`, `1h30m`. */
function everyText(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  const h = Math.floor(minutes / 60);
  const m = minutes % 60;
  return h === 0 ? `${m}m` : m === 0 ? `${h}h` : `${h}h${m}m`;
}

/** `00:30`: a time of day from milliseconds after midnight. */
function clockText(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  return `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
}

function isIntraday(d: ScheduleDescription): boolean {
  return d.action.type === 'startWorkflow' && d.action.workflowType === syncIntraday.name;
}

/**
 * When a schedule runs, in words. The server keeps a cron expression as calendar specs; shown
 * back in cron order (minute, hour, day of month, month, day of week) with its time zone. The
 * intraday schedule is an interval, said with what each of its runs pulls.
 */
function calendarText(d: ScheduleDescription): string {
  const cals = (d.spec.calendars ?? []) as unknown as Record<string, DescribedRange[] | undefined>[];
  const every = (d.spec.intervals ?? []).map((i) => `every ${everyText(Number(i.every))}`);
  if (cals.length === 0) {
    if (every.length === 0) return '(no calendar)';
    if (!isIntraday(d)) return `${every.join('; ')} (UTC)`;
    return (
      `${every.join('; ')}, the open UTC day as a partial day (its rows so far, nothing deleted); ` +
      `from ${clockText(CLOSED_DAY_AFTER_MS)} UTC the day that just closed, once, as a complete day`
    );
  }
  const cron = cals
    .map((c) =>
      [
        field(c.minute, [0, 59]),
        field(c.hour, [0, 23]),
        field(c.dayOfMonth, [1, 31]),
        field(c.month, ['JANUARY', 'DECEMBER']),
        field(c.dayOfWeek, ['SUNDAY', 'SATURDAY']),
      ].join(' '),
    )
    .join('; ');
  return `${cron} (${d.spec.timezone || 'UTC'})`;
}

/** The description as plain lines for the terminal. */
export function formatSchedule(d: ScheduleDescription): string[] {
  const lines = [
    `schedule   ${d.scheduleId}${isIntraday(d) ? ' (intraday)' : ' (daily)'}`,
    `state      ${d.state.paused ? 'paused' : 'active'}${d.state.note ? ` (${d.state.note})` : ''}`,
    `when       ${calendarText(d)}`,
    `policies   overlap ${d.policies.overlap}, catch-up window ${d.policies.catchupWindow / 1000}s`,
    `task queue ${d.action.type === 'startWorkflow' ? d.action.taskQueue : '?'}`,
    `next runs  ${d.info.nextActionTimes.map((t) => t.toISOString()).join(', ') || '(none)'}`,
    `running    ${d.info.runningActions.map((a) => a.workflow.workflowId).join(', ') || '(none)'}`,
    `taken      ${d.info.numActionsTaken} run(s), ${d.info.numActionsSkippedOverlap} skipped for overlap, ${d.info.numActionsMissedCatchupWindow} missed`,
  ];
  for (const a of d.info.recentActions.slice(-5)) {
    lines.push(`recent     ${a.takenAt.toISOString()} ${a.action.workflow.workflowId}`);
  }
  return lines;
}

/** The lines of a schedule that does not exist, with how to create it. */
export function formatMissingSchedule(id: string): string[] {
  return [`schedule   ${id}`, `state      not created (${createHow(id)})`];
}

/** A schedule's description, or null when it does not exist. */
export async function describeIfExists(client: Client, id: string): Promise<ScheduleDescription | null> {
  try {
    return await client.schedule.getHandle(id).describe();
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) return null;
    throw err;
  }
}
