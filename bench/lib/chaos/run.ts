import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Runtime } from '@temporalio/worker';
import { sql } from 'kysely';
import { type FaultKind, type Simulator, startSimulator } from '../../../src/simulator/index.ts';
import { Rng } from '../../../src/simulator/prng.ts';
import { ensureTemporalCli } from '../../../src/temporal/cli-binary.ts';
import { backfillWorkflowId, startBackfill } from '../../../src/temporal/runs.ts';
import { openWarehouse, type Warehouse } from '../../../src/warehouse/db.ts';
import { migrateToLatest } from '../../../src/warehouse/migrator.ts';
import { type Comparison, compareWithTruth, wronglyDeleted } from './compare.ts';
import { erasedInTruth, erasedStillHeld } from './erased.ts';
import { type ForgetReport, forgetLane, newForgetReport } from './forget.ts';
import { type HeldSeenReport, heldSeenPhase } from './held-seen.ts';
import { INTRADAY_SIM_WINDOWS, type IntradayReport, intradayPhase } from './intraday.ts';
import { lateIdPhase } from './late-id.ts';
import { type PgCluster, startPgCluster } from './pg-cluster.ts';

/**
 * The chaos run: a multi-day backfill through a real Temporal dev server, with several real
 * `crs-sync worker` processes, against the simulator over HTTP and a PostgreSQL cluster of the
 * run's own, while an injector on a seeded schedule kills workers, kills the loader's and the
 * enricher's database sessions, restarts the warehouse and switches the simulator's faults.
 * Backfill passes repeat until every kind of fault reached its quota (or time is up); then a
 * clean pass, and the warehouse is compared with the simulator's ground truth row by row.
 * `npm run chaos` (bench/chaos.ts) and the short run of `npm test` (test/chaos) both call this.
 */
export interface ChaosOptions {
  seed: number;
  /** Days of the backfill, ending yesterday (UTC). */
  days: number;
  recordsPerDay: number;
  workers: number;
  /** Quota of each kind of fault; the chaos phase ends when every kind reached it. */
  faultsPerKind: number;
  /**
   * A safety net, not the plan: the chaos phase ends when every kind reached its quota, and no
   * new pass starts after this many minutes even if one did not (the clean pass still runs; the
   * report's `shortOfQuota` names the kinds left short).
   */
  minutes: number;
  /**
   * Rounds of the "held, then seen again" step after the clean pass (held-seen.ts), over the days
   * in turn; default 20.
   */
  heldRounds?: number;
  /**
   * Intraday pulls of the open day in the last step (intraday.ts), before its closed-day pull;
   * default 6.
   */
  intradayPulls?: number;
  /**
   * Share of the export's records written in another spelling JSON.parse reads as the same record
   * (the simulator's `respell`), all through the run; default 0.05.
   */
  respell?: number;
  /**
   * Erasures (`crs-sync forget`, users and threads in turn) at seeded moments of the chaos phase
   * (forget.ts); the phase lasts until they are made. Default 4.
   */
  forget?: number;
  /** Least pause between two of the harness's own faults (the most is three times it); default 2 s. */
  paceMs?: number;
  /**
   * The first pause between two attempts of a day load in the backfill passes and the intraday
   * pulls (the workflows' `retryInterval`, doubling at each attempt); default the policy's 5 s.
   */
  retryInterval?: string;
  /** Progress lines (stderr in the CLI); silent without one. */
  log?: (line: string) => void;
}

/** The harness's own faults; the simulator counts its own (FaultKind). */
export type HarnessFault = 'worker-kill' | 'db-kill-loader' | 'db-kill-enricher' | 'db-restart';
export type ChaosFault = HarnessFault | FaultKind;

/** The simulator faults the injector switches on for a while, each with the spec that does it. */
export const SIM_WINDOWS: Partial<Record<FaultKind, string>> = {
  '5xx': '5xx=0.5:2',
  '429': '429=0.3:1s',
  cut: 'cut=0.5',
  truncate: 'truncate=0.5',
  stall: `stall=0.5:12s`,
  'token-expiry': 'token-expiry=0.15',
};
/**
 * Always on, clean pass included: poison is data the service holds, not an outage; so are lines
 * in odd but valid spellings (respell: a decoy id before the real one, escaped keys), which a
 * loader must read as JSON.parse reads them.
 */
const poisonSpec = (respell: number) => `poison=0.004,poison-history=0.02,respell=${respell}`;
/** The client's idle timeout; stalls last longer. */
const HTTP_TIMEOUT_MS = 5000;

const HARNESS_FAULTS: readonly HarnessFault[] = [
  'worker-kill',
  'db-kill-loader',
  'db-kill-enricher',
  'db-restart',
];

export const FAULT_KINDS: ChaosFault[] = [
  ...HARNESS_FAULTS,
  ...(Object.keys(SIM_WINDOWS) as FaultKind[]),
  'poison-line',
  'poison-entry',
  'poison-artifact',
  'respell',
];

// Which sessions are the loader's and which the enricher's: by the statement they run or ran last.
const LOADER_SQL = /analytics_messages|load_seen|load_checkpoints|load_day_counts|crs_stage|copy /;
const ENRICHER_SQL = /thread_messages|citations|artifacts|threads/;

export interface ChaosReport {
  seed: number;
  options: Omit<ChaosOptions, 'log'>;
  days: string[];
  injected: Partial<Record<ChaosFault, number>>;
  /**
   * Kinds below their quota when the chaos phase ended (only when `minutes` ran out first);
   * `forget` when fewer erasures than asked were made.
   */
  shortOfQuota: (ChaosFault | 'forget')[];
  /** How long the chaos phase took, in ms (it ends on the quotas, or at `minutes`). */
  chaosPhaseMs: number;
  comparison: Comparison;
  /** Soft-deleted rows the service still has, after the chaos phase (before the clean pass). */
  deletedByFaults: string[];
  workerDeaths: { injected: number; other: number; otherExits: string[] };
  /** What the "over-long line with a late id" step found wrong (late-id.ts); empty when it held. */
  lateId: string[];
  /** What the "held, then seen again" rounds found (held-seen.ts); its two lists count as differences. */
  heldSeen: HeldSeenReport;
  /** What the intraday step found (intraday.ts); its differences count. */
  intraday: IntradayReport;
  /** The erasures of the chaos phase (forget.ts); those that failed for good count as differences. */
  forget: ForgetReport;
  /**
   * After the last step: each erased user, thread or record id a table of either schema still
   * names (differences; the comparison after the clean pass checks the same in its `erased` row).
   */
  erasedAtEnd: string[];
  /** Days a backfill pass reported failed (over all passes), and the distinct reasons. */
  daysFailed: number;
  failures: string[];
  /** Whether the clean pass loaded every day. */
  cleanPassFailedDays: string[];
  /** `day_failed` incidents the workers opened (their days), over the whole run. */
  dayFailedAlerts: string[];
  /** Of those, the days no pass reported failed: a page for a day that did not fail (differences). */
  falsePages: string[];
  passes: number;
  runtimeMs: number;
  differences: number;
}

interface WorkerProc {
  child: ChildProcess;
  killed: boolean;
  stderr: string[];
}

const root = path.resolve(import.meta.dirname, '..', '..', '..');

function isoDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const POISON = poisonSpec(opts.respell ?? 0.05);
  const log = opts.log ?? (() => {});
  const began = Date.now();
  const rng = new Rng(opts.seed);
  log(`chaos: seed ${opts.seed} (CHAOS_SEED=${opts.seed} replays the schedule)`);
  const real = new Date();
  const today = Date.UTC(real.getUTCFullYear(), real.getUTCMonth(), real.getUTCDate());
  // The simulator's clock stands still while passes load and the run compares; it stands at
  // 00:45 UTC (or earlier, the real time), so the intraday step, last, has the rest of the day
  // to move it through, never back.
  const frozen = new Date(Math.min(real.getTime(), today + 45 * 60_000));
  let clock = frozen.getTime();
  const days = Array.from({ length: opts.days }, (_, i) => isoDay(today - (opts.days - i) * 86_400_000));
  const from = days[0]!;
  const to = days.at(-1)!;

  let cluster: PgCluster | undefined;
  let env: TestWorkflowEnvironment | undefined;
  let sim: Simulator | undefined;
  let w: Warehouse | undefined;
  const workers: WorkerProc[] = [];
  let stopping = false;
  const deaths = { injected: 0, other: 0, otherExits: [] as string[] };
  // Should the harness itself die (a test timeout), its workers must not outlive it.
  const killAll = () => {
    for (const p of workers) p.child.kill('SIGKILL');
  };
  process.once('exit', killAll);
  const harnessCounts = new Map<HarnessFault, number>();
  const bump = (k: HarnessFault) => harnessCounts.set(k, (harnessCounts.get(k) ?? 0) + 1);
  try {
    cluster = await startPgCluster();
    log(`chaos: warehouse ${cluster.url} (own cluster in ${cluster.dir})`);
    const schema = 'chaos';
    w = openWarehouse({ url: cluster.url, schema, max: 4, applicationName: 'crs-chaos' });
    await migrateToLatest(w);
    if (!runtimeInstalled) {
      runtimeInstalled = true;
      Runtime.install({ logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } });
    }
    const cli = await ensureTemporalCli();
    env = await TestWorkflowEnvironment.createLocal({
      server: {
        ...(cli ? { executable: { type: 'existing-path' as const, path: cli } } : {}),
        ip: '127.0.0.1',
        namespace: 'default',
        log: { format: 'pretty', level: 'error' },
      },
    });
    const client: Client = env.client;
    sim = await startSimulator({
      port: 0,
      seed: opts.seed,
      days: opts.days + 1,
      recordsPerDay: opts.recordsPerDay,
      // A stopped clock: no record arrives late and no thread is deleted while the run compares.
      // Only the intraday step moves it, forward.
      now: () => new Date(clock),
      faults: POISON,
      admin: true,
    });
    const simEnv = sim.env();
    const taskQueue = 'crs-chaos';

    const startWorker = (extraEnv: Record<string, string> = {}): WorkerProc => {
      const child = spawn(process.execPath, [path.join(root, 'bin', 'crs-sync.js'), 'worker'], {
        cwd: root,
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          ...simEnv,
          DATABASE_URL: cluster!.url,
          CRS_SCHEMA: schema,
          TEMPORAL_ADDRESS: env!.address,
          TEMPORAL_NAMESPACE: 'default',
          TEMPORAL_TASK_QUEUE: taskQueue,
          TEMPORAL_SHUTDOWN_GRACE: '1s',
          // Several workers on one machine: the SDK's metrics port would be taken by the first.
          TEMPORAL_METRICS_ADDRESS: '',
          CRS_BATCH_SIZE: '200',
          // Alerts checked often: every day_failed incident the run opens is compared with the
          // days that really failed (ChaosReport.falsePages).
          CRS_ALERT_CHECK_INTERVAL: '5s',
          CRS_LOAD_PARTITIONS: '2',
          CRS_ENRICH_CONCURRENCY: '4',
          CRS_RATE_LIMIT_RPS: '1000',
          CRS_HTTP_TIMEOUT_MS: String(HTTP_TIMEOUT_MS),
          LOG_LEVEL: 'warn',
          ...extraEnv,
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      const proc: WorkerProc = { child, killed: false, stderr: [] };
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (d: string) => {
        proc.stderr.push(d);
        if (proc.stderr.length > 40) proc.stderr.shift();
      });
      child.on('exit', (code, signal) => {
        const i = workers.indexOf(proc);
        if (i >= 0) workers.splice(i, 1);
        if (proc.killed || stopping) return;
        // A death the injector did not cause: counted, its last words kept, and replaced.
        deaths.other++;
        // Its fatal lines (level 50 or more, or the CLI's own last words) say why it died.
        const lines = proc.stderr.join('').trim().split('\n');
        const fatal = lines.filter((l) => /"level":(50|60)|^crs-sync:|Error/.test(l));
        deaths.otherExits.push(
          `exit ${code ?? signal}: ${(fatal.length > 0 ? fatal : lines).slice(-2).join(' | ').slice(0, 1500)}`,
        );
        log(`chaos: a worker died on its own (${code ?? signal})`);
        // Replaced after a pause: a worker that cannot start must not respawn in a tight loop.
        setTimeout(() => {
          if (!stopping) workers.push(startWorker());
        }, 2000);
      });
      return proc;
    };
    for (let i = 0; i < opts.workers; i++) workers.push(startWorker());
    // What the CLI needs to reach the warehouse and the service, as an operator's shell has it.
    const cliEnv: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      ...simEnv,
      DATABASE_URL: cluster.url,
      CRS_SCHEMA: schema,
      LOG_LEVEL: 'warn',
    };

    const simCount = (k: FaultKind) => sim!.faultCounts()[k] ?? 0;
    const count = (k: ChaosFault): number =>
      (harnessCounts.get(k as HarnessFault) ?? 0) +
      (k in SIM_WINDOWS || k.startsWith('poison') || k === 'respell' ? simCount(k as FaultKind) : 0);
    // Poison is data the service holds, not an event: how much of it there is depends on the
    // data set, so waiting for more would never end; the table shows how much was met.
    const short = () =>
      FAULT_KINDS.filter((k) => !k.startsWith('poison') && k !== 'respell' && count(k) < opts.faultsPerKind);

    /**
     * One fault struck now. A worker kill takes `victimPid`'s worker when given and alive, else
     * one at random. False when there was nothing to strike (no session to terminate, no worker).
     */
    const strike = async (
      kind: ChaosFault,
      rand: Rng,
      over: () => boolean,
      victimPid?: number,
    ): Promise<boolean> => {
      switch (kind) {
        case 'worker-kill': {
          const victim =
            workers.find((p) => victimPid !== undefined && p.child.pid === victimPid) ??
            (workers.length > 0 ? workers[rand.int(workers.length)] : undefined);
          if (!victim) return false;
          victim.killed = true;
          const exited = once(victim.child, 'exit');
          victim.child.kill('SIGKILL');
          await exited;
          deaths.injected++;
          bump('worker-kill');
          workers.push(startWorker());
          return true;
        }
        case 'db-kill-loader':
        case 'db-kill-enricher': {
          const n = await cluster!.terminate(kind === 'db-kill-loader' ? LOADER_SQL : ENRICHER_SQL);
          if (n > 0) bump(kind);
          return n > 0;
        }
        case 'db-restart': {
          await cluster!.stop(rand.chance(0.5) ? 'immediate' : 'fast');
          bump('db-restart');
          await sleep(rand.range(300, 2500));
          await cluster!.start();
          return true;
        }
        default: {
          const spec = SIM_WINDOWS[kind as FaultKind];
          if (!spec) return false;
          // On until it has struck (an export fault needs an export request to strike) or for at
          // most 20 s; the chaos phase ending switches it off too.
          const before = simCount(kind as FaultKind);
          // A burst strikes a URL's first requests: a new window starts their count afresh.
          if (kind === '5xx') sim!.restartFaultBursts();
          sim!.setFaults(`${POISON},${spec}`);
          const until = Date.now() + 15_000;
          await sleep(rand.range(1000, 3000));
          while (simCount(kind as FaultKind) === before && Date.now() < until && !over()) await sleep(250);
          sim!.setFaults(POISON);
          return simCount(kind as FaultKind) > before;
        }
      }
    };

    /**
     * One action of an injector lane: the kind is drawn (seeded) among the lane's kinds below
     * their quota, or among all of them once every quota is met.
     */
    const inject = async (lane: readonly ChaosFault[], rand: Rng, over: () => boolean): Promise<void> => {
      const open = short().filter((k) => lane.includes(k));
      // A lane whose kinds all reached their quota rests: the passes may then finish.
      if (open.length === 0) return;
      await strike(rand.pick(open), rand, over);
    };

    // ---- the chaos phase: backfill passes, one after another, under the injector ----
    const failures = new Set<string>();
    let daysFailed = 0;
    // The days a pass reported failed, by name: what a day_failed page may name.
    const failedDayNames = new Set<string>();
    let passes = 0;
    let chaosDone = false;
    const chaosBegan = Date.now();
    const deadline = chaosBegan + opts.minutes * 60_000;
    // Two lanes, each on a seeded schedule of its own: the harness's own faults, and the
    // simulator's (a window there may wait several seconds for an export request to strike).
    // The pace leaves an attempt room to make progress between two faults: a fault every second
    // or two kept a day from ever finishing on a loaded 2-core machine.
    const lane = async (kinds: readonly ChaosFault[], rand: Rng, minMs: number, maxMs: number) => {
      while (!chaosDone) {
        await sleep(rand.range(minMs, maxMs));
        if (chaosDone) break;
        await inject(kinds, rand, () => chaosDone).catch((err: unknown) => {
          failures.add(`injector: ${(err as Error).message}`);
        });
      }
    };
    const forget = newForgetReport(opts.forget ?? 4);
    const forgetsLeft = () => forget.erasures.length < forget.planned;
    const injector = Promise.all([
      lane(HARNESS_FAULTS, new Rng(rng.word()), opts.paceMs ?? 2000, 3 * (opts.paceMs ?? 2000)),
      lane(Object.keys(SIM_WINDOWS) as FaultKind[], new Rng(rng.word()), 1000, 3000),
      // A third lane: the operator's erasures, while the passes load and the faults strike.
      forgetLane({
        sim,
        days,
        seed: opts.seed,
        cliEnv,
        report: forget,
        began: chaosBegan,
        over: () => chaosDone,
        url: cluster.url,
        log,
      }).catch((err: unknown) => {
        forget.failed.push(`forget lane: ${(err as Error).message}`);
      }),
    ]);
    try {
      do {
        passes++;
        // Every thread queued again, as a re-load after upstream changes would: each pass then
        // enriches under faults too, not only the first.
        if (passes > 1) {
          await retryDb(() =>
            sql`update threads set enrich_status = 'pending', enrich_requested_at = now()`.execute(w!.db),
          );
        }
        const handle = await retryDb(() =>
          startBackfill(client, taskQueue, {
            from,
            to,
            enrich: true,
            concurrency: Math.min(4, opts.days),
            // A dead worker's load is retried within seconds.
            heartbeatTimeout: '5s',
            ...(opts.retryInterval ? { retryInterval: opts.retryInterval } : {}),
          }),
        );
        try {
          const r = await handle.result();
          daysFailed += r.failedDays.length;
          for (const d of r.failedDays) failedDayNames.add(d);
          if (r.failedDays.length > 0) failures.add(`pass ${passes}: days failed ${r.failedDays.join(', ')}`);
        } catch (err) {
          const cause = (err as { cause?: Error }).cause?.message;
          // A backfill with failed days fails itself, naming how many.
          daysFailed += Number(/(\d+) of \d+ day\(s\) failed/.exec(cause ?? '')?.[1] ?? 1);
          for (const d of days) if ((cause ?? '').includes(d)) failedDayNames.add(d);
          failures.add(`pass ${passes}: ${(err as Error).message}${cause ? `: ${cause}` : ''}`);
        }
        log(`chaos: pass ${passes} done; ${FAULT_KINDS.map((k) => `${k} ${count(k)}`).join(', ')}`);
      } while ((short().length > 0 || forgetsLeft()) && Date.now() < deadline);
    } finally {
      chaosDone = true;
      await injector;
    }
    const shortOfQuota: ChaosReport['shortOfQuota'] = [
      ...short(),
      ...(forgetsLeft() ? ['forget' as const] : []),
    ];
    const chaosPhaseMs = Date.now() - chaosBegan;
    log(
      `chaos: chaos phase over after ${passes} pass(es), ${Math.round(chaosPhaseMs / 1000)} s` +
        (shortOfQuota.length > 0 ? `; short of the quota: ${shortOfQuota.join(', ')}` : '; every quota met'),
    );
    sim.setFaults(POISON);
    const deletedByFaults = await retryDb(() => wronglyDeleted(w!, sim!, days));

    // ---- the clean pass: no faults but the poison the service holds ----
    const clean = await startBackfill(client, taskQueue, {
      from,
      to,
      enrich: true,
      concurrency: Math.min(4, opts.days),
    });
    let cleanPassFailedDays: string[] = [];
    try {
      cleanPassFailedDays = (await clean.result()).failedDays;
      for (const d of cleanPassFailedDays) failedDayNames.add(d);
    } catch (err) {
      const cause = (err as { cause?: Error }).cause?.message ?? '';
      cleanPassFailedDays = days.filter((d) => cause.includes(d));
      if (cleanPassFailedDays.length === 0) cleanPassFailedDays = days;
      for (const d of cleanPassFailedDays) failedDayNames.add(d);
      failures.add(`clean pass: ${(err as Error).message}: ${cause}`);
    }
    log(`chaos: clean pass done (${backfillWorkflowId(from, to)})`);
    // What the erasures took, read from the truth as it is when asked: the open day's records
    // grow as the intraday step moves the clock.
    const erased = () =>
      erasedInTruth(
        sim!,
        forget.erasures.filter((e) => e.kind === 'user').map((e) => e.id),
        forget.erasures.filter((e) => e.kind === 'thread').map((e) => e.id),
      );
    log(
      `chaos: ${forget.erasures.length} erasure(s) made; ` +
        `comparing (erased records expected absent: ${erased().messages.size})`,
    );
    const comparison = await compareWithTruth(w, sim, days, erased());
    // The last day, or the last one holding an erased record: its over-long line is grown too.
    const gone = erased();
    const holdsErased = (d: string) =>
      sim!.truth.exportDay(d).some((r) => gone.messages.has(r['Message ID'].toLowerCase()));
    const lateDay = days.findLast(holdsErased) ?? to;
    log(`chaos: late id on ${lateDay}${holdsErased(lateDay) ? ", an erased record's line grown too" : ''}`);
    const lateId = await lateIdPhase({
      w,
      sim,
      client,
      day: lateDay,
      erased: erased(),
      startWorker: (extra) => workers.push(startWorker(extra)),
    });
    const heldSeen = await heldSeenPhase({
      w,
      sim,
      client,
      days,
      rounds: opts.heldRounds ?? 20,
      seed: opts.seed,
      cliEnv,
      startWorker: (extra) => workers.push(startWorker(extra)),
      log,
    });
    // The table's faults are those of the passes and the steps after them; the intraday step
    // counts its own.
    const injected = Object.fromEntries(FAULT_KINDS.map((k) => [k, count(k)])) as Record<ChaosFault, number>;
    const intraday = await intradayPhase({
      w,
      sim,
      client,
      taskQueue,
      seed: opts.seed,
      pulls: opts.intradayPulls ?? 6,
      ...(opts.retryInterval ? { retryInterval: opts.retryInterval } : {}),
      openDay: isoDay(today),
      startMs: frozen.getTime(),
      setClock: (ms) => {
        clock = ms;
      },
      strike: (kind, rand, victimPid) => strike(kind, rand, () => false, victimPid),
      simFaults: (kind) => {
        if (kind === '5xx') sim!.restartFaultBursts();
        const spec = kind ? INTRADAY_SIM_WINDOWS[kind] : undefined;
        sim!.setFaults(spec ? `${POISON},${spec}` : POISON);
      },
      simCount,
      retryDb,
      erased,
      log,
    });
    // Last: after every re-pull, import and intraday pull, no table names what was erased.
    const erasedAtEnd = await retryDb(() => erasedStillHeld(w!.pool, schema, erased()));
    // Every day_failed page must name a day a pass saw fail: a retry in progress is not a failure.
    const paged = await retryDb(() =>
      w!.pool.query<{ day: string }>(
        `select distinct details->>'day' as day from alert_incidents where kind = 'day_failed' order by 1`,
      ),
    );
    const dayFailedAlerts = paged.rows.map((r) => r.day);
    const falsePages = dayFailedAlerts.filter((d) => !failedDayNames.has(d));
    const { log: _log, ...rest } = opts;
    const differences =
      falsePages.length +
      Object.values(comparison.differences).reduce((n, d) => n + d.length, 0) +
      deletedByFaults.length +
      lateId.length +
      heldSeen.deletedInSource.length +
      heldSeen.problems.length +
      intraday.differences.length +
      forget.failed.length +
      erasedAtEnd.length;
    return {
      seed: opts.seed,
      options: rest,
      days,
      injected,
      shortOfQuota,
      chaosPhaseMs,
      comparison,
      deletedByFaults,
      workerDeaths: deaths,
      lateId,
      heldSeen,
      intraday,
      forget,
      erasedAtEnd,
      daysFailed,
      failures: [...failures],
      cleanPassFailedDays,
      dayFailedAlerts,
      falsePages,
      passes,
      runtimeMs: Date.now() - began,
      differences,
    };
  } finally {
    stopping = true;
    process.off('exit', killAll);
    await Promise.all(
      workers.map(async (p) => {
        if (p.child.exitCode !== null || p.child.signalCode !== null) return;
        const exited = once(p.child, 'exit');
        p.child.kill('SIGKILL');
        await exited;
      }),
    );
    await w?.close().catch(() => {});
    await sim?.close().catch(() => {});
    await env?.teardown().catch(() => {});
    await cluster?.destroy().catch(() => {});
  }
}

let runtimeInstalled = false;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The harness's own reads, through a warehouse restart the injector may just have done. */
async function retryDb<T>(fn: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= 20) throw err;
      await sleep(500);
    }
  }
}

/** The table a run prints: faults by kind, rows compared, differences, deaths, failed days, time. */
export function formatReport(r: ChaosReport): string {
  const lines: string[] = [];
  const pad = (s: string, n: number) => s.padEnd(n);
  lines.push(
    `chaos run: seed ${r.seed}, ${r.days.length} days (${r.days[0]} … ${r.days.at(-1)}), ` +
      `${r.options.recordsPerDay} records/day, ${r.options.workers} workers, ${r.passes} backfill passes + 1 clean pass`,
  );
  lines.push('');
  lines.push(`${pad('fault', 18)} injected (quota ${r.options.faultsPerKind})`);
  for (const [k, n] of Object.entries(r.injected)) lines.push(`${pad(k, 18)} ${n}`);
  lines.push(
    `chaos phase: ${Math.round(r.chaosPhaseMs / 1000)} s, ` +
      (r.shortOfQuota.length > 0
        ? `ended by --minutes with ${r.shortOfQuota.join(', ')} short of the quota`
        : 'ended when every quota was met'),
  );
  lines.push('');
  lines.push(`${pad('table', 18)} ${pad('rows compared', 14)} differences`);
  for (const [t, n] of Object.entries(r.comparison.compared)) {
    lines.push(`${pad(t, 18)} ${pad(String(n), 14)} ${r.comparison.differences[t]?.length ?? 0}`);
  }
  lines.push(`${pad('deleted by faults', 18)} ${pad('', 14)} ${r.deletedByFaults.length}`);
  lines.push(`${pad('late id', 18)} ${pad('', 14)} ${r.lateId.length}`);
  const h = r.heldSeen;
  lines.push(
    `${pad('held, seen again', 18)} ${pad(`${h.rounds} rounds`, 14)} ${h.deletedInSource.length + h.problems.length}`,
  );
  const d = r.intraday;
  lines.push(`${pad('intraday pulls', 18)} ${pad(String(d.rowsCompared), 14)} ${d.differences.length}`);
  lines.push(`${pad('erased, at the end', 18)} ${pad('', 14)} ${r.erasedAtEnd.length}`);
  lines.push('');
  const f = r.forget;
  const byKind = (k: string) => f.erasures.filter((e) => e.kind === k).length;
  lines.push(
    `forget: ${f.erasures.length} of ${f.planned} erasures (${byKind('user')} users, ${byKind('thread')} threads) ` +
      `at ${f.erasures.map((e) => `${Math.round(e.atMs / 1000)} s`).join(', ') || 'none'} of the chaos phase; ` +
      `${f.erasures.reduce((n, e) => n + e.rows, 0)} rows erased; ` +
      `${f.erasures.reduce((n, e) => n + e.attempts - 1, 0)} attempt(s) the faults broke, run again ` +
      `(${f.killedMidErasure} of ${f.watched} watched killed inside the erasure's transaction on purpose); ` +
      `${f.failed.length} failed for good`,
  );
  lines.push(
    `held, then seen again: ${h.rounds} rounds (${Object.entries(h.byReload)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}), ${h.held} ids held, ${h.deletedByApply} deleted by deletes apply, ` +
      `${h.deletedInSource.length} of them rows the service holds`,
  );
  const hhmm = (iso: string) => iso.slice(11, 16);
  lines.push(
    `intraday: open day ${d.openDay}, ${d.pulledAt.length - 1} pulls (${d.pulledAt
      .slice(0, -1)
      .map(hhmm)
      .join(', ')} UTC, simulated) + the closed-day pull (${d.pulledAt.at(-1)?.slice(0, 16)}); ` +
      `rows of the day at each: ${d.rowsPerPull.join(', ')}; ${d.keptAfterUpstreamDelete} kept live after ` +
      `an upstream delete until the closed-day pull; faults: ${
        Object.entries(d.injected)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ') || 'none'
      } (${d.struckMidPull} of the harness's while the day loaded, ${d.holderKills} kill(s) of the worker holding ` +
      `the load); ${d.again.length} run(s) again at the same time`,
  );
  lines.push('');
  lines.push(`worker deaths: ${r.workerDeaths.injected} injected, ${r.workerDeaths.other} other`);
  lines.push(
    `days failed: ${r.daysFailed} in the chaos passes, ${r.cleanPassFailedDays.length} in the clean pass`,
  );
  lines.push(
    `day_failed pages: ${r.dayFailedAlerts.length}${r.dayFailedAlerts.length > 0 ? ` (${r.dayFailedAlerts.join(', ')})` : ''}, ` +
      `of days no pass saw fail: ${r.falsePages.length}`,
  );
  lines.push(`run time: ${(r.runtimeMs / 1000).toFixed(0)} s`);
  lines.push(`differences: ${r.differences}`);
  const samples = [
    ...r.falsePages.map((d) => `day_failed paged for ${d}, which no pass saw fail`),
    ...r.deletedByFaults,
    ...r.lateId,
    ...r.heldSeen.deletedInSource,
    ...r.heldSeen.problems,
    ...r.intraday.differences,
    ...r.forget.failed,
    ...r.erasedAtEnd,
    ...Object.values(r.comparison.differences).flat(),
  ].slice(0, 20);
  if (samples.length > 0) lines.push('', 'first differences:', ...samples.map((s) => `  ${s}`));
  if (r.failures.length > 0)
    lines.push('', 'failures:', ...r.failures.slice(0, 10).map((s) => `  ${s.slice(0, 300)}`));
  if (r.workerDeaths.otherExits.length > 0)
    lines.push('', 'other worker deaths:', ...r.workerDeaths.otherExits.slice(0, 10).map((s) => `  ${s}`));
  return lines.join('\n');
}
