import type { Client } from '@temporalio/client';
import { dayWorkflowId } from '../../../contract/workflows.ts';
import { shiftDay } from '../../../src/common/civil-date.ts';
import type { FaultKind, Simulator } from '../../../src/simulator/index.ts';
import { Rng } from '../../../src/simulator/prng.ts';
import type { Warehouse } from '../../../src/warehouse/db.ts';
import { getWatermark } from '../../../src/warehouse/ledger.ts';
import { syncIntraday } from '../../../workflows/index.ts';
import { diffRows, expectedMessages, type Row, readersAgainstRaw, warehouseMessages } from './compare.ts';
import type { Erased } from './erased.ts';

/**
 * The chaos run's intraday step, last of the run: the open UTC day pulled several times as the
 * simulator's clock advances through it, each pull (`syncIntraday`, the intraday schedule's
 * workflow) under one of the harness's faults struck while the day's load runs and one of the
 * simulator's export faults switched on for it; then, after midnight, the run that pulls it as
 * the closed day. Checked after each pull, with the clock standing still:
 *
 * - the day's rows are the export so far, column by column; a row the export no longer holds
 *   is still there, live, and is one an earlier pull saw whose thread the service has deleted
 *   since (a partial pull deletes nothing); no row of the day is marked deleted;
 * - the poison lines the export has served for the day so far are quarantined;
 * - the ledger says `partial`, and the watermark does not reach the day.
 *
 * After the closed-day pull: the day's rows equal the export exactly (the rows of deleted
 * threads marked deleted, nothing else), and the ledger says `complete`.
 *
 * A pull whose day failed, or that the `truncate` fault struck, is run again at the same clock
 * before the check (counted as `again`): a body cut cleanly at a line boundary is, for any
 * client, the same as a smaller export, so no pull could load the rest of the day from it.
 * Enrichment is off in these pulls (its faults are the backfill passes'), so the enricher's
 * session kill and the token expiry are not among the faults here.
 */

/** The harness's faults a pull meets, struck once the open day's load runs. */
export const INTRADAY_HARNESS_FAULTS = ['worker-kill', 'db-kill-loader', 'db-restart'] as const;
/**
 * The simulator's export faults a pull meets, each switched on at its start until it struck: with
 * certainty, as a run makes one or two export requests (the backfill passes' odds missed them).
 */
export const INTRADAY_SIM_WINDOWS: Partial<Record<FaultKind, string>> = {
  '5xx': '5xx=1:2',
  '429': '429=1:1s',
  cut: 'cut=1',
  truncate: 'truncate=1',
  stall: 'stall=1:12s',
};
export const INTRADAY_SIM_FAULTS = Object.keys(INTRADAY_SIM_WINDOWS) as FaultKind[];
export type IntradayHarnessFault = (typeof INTRADAY_HARNESS_FAULTS)[number];

export interface IntradayReport {
  openDay: string;
  /** Simulated times of the open-day pulls, then of the closed-day pull (ISO). */
  pulledAt: string[];
  /** Rows of the day the export held at each check (the last one after the closed-day pull). */
  rowsPerPull: number[];
  /** Rows kept live by partial pulls after their thread was deleted upstream (at the last open pull). */
  keptAfterUpstreamDelete: number;
  /** Runs again at the same clock, and why. */
  again: string[];
  /** Faults struck during the step, by kind (the simulator's as it counted them). */
  injected: Partial<Record<IntradayHarnessFault | FaultKind, number>>;
  /** Harness faults struck while the open day's load was running (the rest landed after it). */
  struckMidPull: number;
  /** Worker kills that took the worker holding the day's load activity. */
  holderKills: number;
  /** Expected rows over all checks. */
  rowsCompared: number;
  differences: string[];
}

export interface IntradayStep {
  w: Warehouse;
  sim: Simulator;
  client: Client;
  taskQueue: string;
  seed: number;
  /** Open-day pulls before the closed-day one. */
  pulls: number;
  /** The pulls' first pause between two attempts of the load (the workflows' `retryInterval`). */
  retryInterval?: string;
  /** The open day (the run's UTC day) and the simulated instant the step starts from. */
  openDay: string;
  startMs: number;
  setClock: (ms: number) => void;
  /**
   * Strikes one harness fault; `victimPid`: the worker to kill (else one at random). False when
   * it found nothing to strike (no session of the loader to terminate).
   */
  strike: (kind: IntradayHarnessFault, rand: Rng, victimPid?: number) => Promise<boolean>;
  /** The simulator's fault spec with `kind` switched on (the always-on poison included), or off. */
  simFaults: (kind: FaultKind | undefined) => void;
  simCount: (kind: FaultKind) => number;
  retryDb: <T>(fn: () => Promise<T>) => Promise<T>;
  /** What `crs-sync forget` erased, as the truth is now: its records are expected in no pull. */
  erased: () => Erased;
  log: (line: string) => void;
}

export async function intradayPhase(o: IntradayStep): Promise<IntradayReport> {
  const rand = new Rng(o.seed ^ 0x1d7a);
  const report: IntradayReport = {
    openDay: o.openDay,
    pulledAt: [],
    rowsPerPull: [],
    keptAfterUpstreamDelete: 0,
    again: [],
    injected: {},
    struckMidPull: 0,
    holderKills: 0,
    rowsCompared: 0,
    differences: [],
  };
  const simBefore = Object.fromEntries(INTRADAY_SIM_FAULTS.map((k) => [k, o.simCount(k)]));
  // The faults in a seeded order, each kind in turn: every kind meets a pull when there are
  // at least as many pulls as kinds.
  const harnessOrder = shuffled(INTRADAY_HARNESS_FAULTS, rand);
  const simOrder = shuffled(INTRADAY_SIM_FAULTS, rand);
  const dayStart = Date.parse(`${o.openDay}T00:00:00Z`);
  // The pulls spread over what is left of the open day, the last a quarter of an hour before its end.
  const span = dayStart + 86_400_000 - 15 * 60_000 - o.startMs;
  const times = Array.from({ length: o.pulls }, (_, i) => o.startMs + Math.round(((i + 1) * span) / o.pulls));
  // 01:00 the next day: after the 00:30 from which the day that closed is pulled as complete.
  times.push(dayStart + 86_400_000 + 3_600_000);
  // Every row the export of the day has held at some check: what a partial pull may keep.
  const seen = new Map<string, Row>();
  let runs = 0;

  for (const [i, at] of times.entries()) {
    const closing = i === o.pulls;
    o.setClock(at);
    const now = new Date(at).toISOString();
    report.pulledAt.push(now);
    const harness = harnessOrder[i % harnessOrder.length]!;
    const simKind = simOrder[i % simOrder.length]!;
    for (let attempt = 1; ; attempt++) {
      const truncatedBefore = o.simCount('truncate');
      // Faults on the first run of this clock only; a run again at the same clock is clean.
      const faulty = attempt === 1;
      if (faulty) o.simFaults(simKind);
      const handle = await o.retryDb(() =>
        o.client.workflow.start(syncIntraday, {
          taskQueue: o.taskQueue,
          workflowId: `chaos-intraday-${++runs}`,
          args: [
            {
              enrich: false,
              now,
              heartbeatTimeout: '5s',
              ...(o.retryInterval ? { retryInterval: o.retryInterval } : {}),
            },
          ],
        }),
      );
      let ended = false;
      const result = handle
        .result()
        .then((r) => (r.failedDays.length > 0 ? `days failed: ${r.failedDays.join(', ')}` : null))
        .catch(
          (err: Error) =>
            `the run failed: ${err.message}: ${(err as { cause?: Error }).cause?.message ?? ''}`,
        )
        .finally(() => {
          ended = true;
        });
      const struck = faulty ? strikeMidPull(o, harness, rand, () => ended) : Promise.resolve(undefined);
      const simOff = faulty ? simWindow(o, simKind, () => ended) : Promise.resolve();
      const failed = await result;
      const hit = await struck;
      if (hit) {
        report.injected[harness] = (report.injected[harness] ?? 0) + 1;
        if (hit !== 'after') report.struckMidPull++;
        if (hit === 'holder') report.holderKills++;
      }
      await simOff;
      const truncated = o.simCount('truncate') > truncatedBefore;
      if (!failed && !truncated) break;
      const why = `${now} ${failed ?? 'a truncated export'}`;
      report.again.push(why);
      o.log(`chaos: intraday pull at ${now} runs again (${why.slice(0, 200)})`);
      if (attempt >= 4) {
        report.differences.push(`intraday ${now}: no clean pull in ${attempt} runs (${why.slice(0, 300)})`);
        break;
      }
    }
    const checked = await o.retryDb(() => (closing ? checkClosed(o) : checkOpen(o, seen, now)));
    report.rowsCompared += checked.expected;
    report.rowsPerPull.push(checked.expected);
    if (!closing) report.keptAfterUpstreamDelete = checked.kept;
    report.differences.push(...checked.differences);
    o.log(
      `chaos: intraday ${closing ? 'closed-day pull' : 'pull'} at ${now}: ${checked.expected} rows, ` +
        `${checked.kept} ${closing ? 'marked deleted' : 'kept live'} after an upstream delete, ` +
        `${checked.differences.length} differences`,
    );
  }
  o.simFaults(undefined);
  for (const k of INTRADAY_SIM_FAULTS) {
    const n = o.simCount(k) - (simBefore[k] ?? 0);
    if (n > 0) report.injected[k] = n;
  }
  return report;
}

/**
 * Strikes the pull's harness fault once the open day's load runs (the ledger says `running`), or
 * when the run ends first; a worker kill aims at the worker holding the load's activity. Returns
 * whether it struck while the load was still running (`holder`: a kill of the worker holding
 * it), after it, or not at all.
 */
async function strikeMidPull(
  o: IntradayStep,
  kind: IntradayHarnessFault,
  rand: Rng,
  ended: () => boolean,
): Promise<'mid-pull' | 'holder' | 'after' | undefined> {
  const running = async () =>
    (
      await o.w.pool
        .query(`select 1 from sync_days where day = $1 and status = 'running'`, [o.openDay])
        .catch(() => ({ rows: [] }))
    ).rows.length > 0;
  while (!ended() && !(await running())) await sleep(25);
  const mid = !ended();
  const pid = kind === 'worker-kill' && mid ? await holderPid(o.client, o.openDay) : undefined;
  if (await o.strike(kind, rand, pid)) return !mid ? 'after' : pid === undefined ? 'mid-pull' : 'holder';
  // A session kill looks at the statements running at one instant and finds none between two of
  // them (a small open day's load is a few short statements): it looks again while the load runs,
  // so whether it strikes depends on the load's progress, not on when it first looked.
  while (kind === 'db-kill-loader' && !ended()) {
    await sleep(10);
    if (await o.strike(kind, rand)) return 'mid-pull';
  }
  return undefined;
}

/** The items in a seeded order. */
function shuffled<T>(items: readonly T[], rand: Rng): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = rand.int(i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** The process id of the worker running the day's load activity, from its identity (pid@host). */
async function holderPid(client: Client, day: string): Promise<number | undefined> {
  try {
    const d = await client.workflow.getHandle(dayWorkflowId(day)).describe();
    const identity = d.raw.pendingActivities?.[0]?.lastWorkerIdentity ?? '';
    const pid = Number(identity.split('@')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** The simulator fault on until it struck or the run ended, then off (poison stays on). */
async function simWindow(o: IntradayStep, kind: FaultKind, ended: () => boolean): Promise<void> {
  const before = o.simCount(kind);
  while (o.simCount(kind) === before && !ended()) await sleep(100);
  o.simFaults(undefined);
}

interface Checked {
  expected: number;
  kept: number;
  differences: string[];
}

/** After an open-day pull: the export so far, rows kept after upstream deletes, nothing deleted. */
async function checkOpen(o: IntradayStep, seen: Map<string, Row>, now: string): Promise<Checked> {
  const differences: string[] = [];
  const expected = expectedMessages(o.sim, [o.openDay], o.erased());
  const actual = await warehouseMessages(o.w, o.openDay);
  // The rows the export no longer holds: kept live when an earlier check saw them and their
  // thread is gone upstream; anything else is a difference (diffRows reports it).
  const kept = new Map<string, Row>();
  for (const id of actual.keys()) {
    const before = seen.get(id);
    if (expected.has(id) || !before || !o.sim.truth.isDeleted(before.thread_id as string)) continue;
    kept.set(id, before);
  }
  for (const [id, row] of expected) seen.set(id, row);
  diffRows(`intraday ${now} analytics_messages`, new Map([...expected, ...kept]), actual, differences);
  const quarantined = new Set(
    (
      (await o.w.pool.query(`select raw from rejected_records where source = 'export' and day = $1`, [
        o.openDay,
      ])) as { rows: { raw: string }[] }
    ).rows.map((r) => r.raw),
  );
  for (const line of o.sim.truth.poisonLines(o.openDay)) {
    if (line.trim() !== '' && !quarantined.has(line))
      differences.push(`intraday ${now} rejected_records: missing ${line.slice(0, 100)}`);
  }
  const ledger = await dayStatus(o.w, o.openDay);
  if (ledger !== 'partial')
    differences.push(`intraday ${now} sync_days ${o.openDay}: ${ledger}, expected partial`);
  const watermark = await getWatermark(o.w.db);
  if (watermark !== null && watermark >= o.openDay)
    differences.push(`intraday ${now}: the watermark ${watermark} counts the partial day ${o.openDay}`);
  differences.push(...(await readersAgainstRaw(o.w, `intraday ${now}`)));
  return { expected: expected.size, kept: kept.size, differences };
}

/** After the closed-day pull: exact, the rows of deleted threads marked deleted, and complete. */
async function checkClosed(o: IntradayStep): Promise<Checked> {
  const differences: string[] = [];
  const expected = expectedMessages(o.sim, [o.openDay], o.erased());
  const actual = await warehouseMessages(o.w, o.openDay);
  const gone = new Map<string, Row>();
  for (const [id, row] of actual) if (!expected.has(id)) gone.set(id, { ...row, deleted: true });
  diffRows(
    `intraday closed ${o.openDay} analytics_messages`,
    new Map([...expected, ...gone]),
    actual,
    differences,
  );
  for (const [id, row] of gone) {
    if (!o.sim.truth.isDeleted(row.thread_id as string))
      differences.push(`intraday closed ${o.openDay} analytics_messages ${id}: not in the service`);
  }
  const ledger = await dayStatus(o.w, o.openDay);
  if (ledger !== 'complete')
    differences.push(`intraday closed ${o.openDay} sync_days: ${ledger}, expected complete`);
  const next = await dayStatus(o.w, shiftDay(o.openDay, 1));
  if (next !== 'partial')
    differences.push(`intraday closed: the next day ${shiftDay(o.openDay, 1)} is ${next}, expected partial`);
  differences.push(...(await readersAgainstRaw(o.w, 'intraday closed')));
  return { expected: expected.size, kept: gone.size, differences };
}

async function dayStatus(w: Warehouse, day: string): Promise<string | undefined> {
  const r = (await w.pool.query(`select status from sync_days where day = $1`, [day])) as {
    rows: { status: string }[];
  };
  return r.rows[0]?.status;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
