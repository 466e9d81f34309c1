import pg from 'pg';
import type { Simulator } from '../../../src/simulator/index.ts';
import { Rng } from '../../../src/simulator/prng.ts';
import { runCli } from './cli.ts';

/**
 * The chaos run's erasures: during the chaos phase, while the backfill passes load and enrich the
 * days and the injector strikes, `crs-sync forget --user ID` or `--thread ID` runs as a separate
 * process, as an operator would, at seeded moments, users and threads in turn. An attempt the
 * faults break (a warehouse restart, a terminated session: the injector takes the erasure's
 * sessions for the loader's or the enricher's) is run again, as an operator would. The first
 * erasure and a seeded half of the others meet a fault of their own: the erasure's session is
 * terminated as soon as it is seen inside its transaction, which must then leave nothing half
 * done; the rerun erases. Every later
 * load (the passes still running, the clean pass, the later steps' re-pulls, imports and the
 * intraday pulls of the open day) must drop the erased records; the comparison expects them
 * nowhere (compare.ts, erased.ts).
 */

export interface ErasureDone {
  kind: 'user' | 'thread';
  /** The id named (lower case): the harness's record for the check; the warehouse keeps hashes. */
  id: string;
  /** When the erasure succeeded, in ms after the chaos phase began. */
  atMs: number;
  attempts: number;
  /** Rows it erased over every table (what `forget --json` said). */
  rows: number;
}

export interface ForgetReport {
  /** Erasures asked for (`--forget`). */
  planned: number;
  erasures: ErasureDone[];
  /** Erasures that failed every attempt, with the last words of the last one (differences). */
  failed: string[];
  /**
   * First attempts watched to be killed (the first erasure's, a seeded half of the others'), and
   * those whose session the lane terminated inside the erasure's transaction (the others ended
   * before it was seen).
   */
  watched: number;
  killedMidErasure: number;
}

// An erasure's session inside its transaction: its lock, its temporary tables, its deletes, its
// own bookkeeping (a load's statements name none of these).
const ERASURE_SQL =
  /share row exclusive|fg_ids|fg_threads|fg_messages|privacy_erasures \(|privacy_suppressions \(/;

/** Attempts of one erasure before it counts as failed; a warehouse restart lasts seconds. */
const ATTEMPTS = 30;

export function newForgetReport(planned: number): ForgetReport {
  return { planned, erasures: [], failed: [], watched: 0, killedMidErasure: 0 };
}

/**
 * The erasures, one after another at seeded pauses, until `planned` were made or `over()`
 * (the erasure under way is finished, not abandoned). Targets are drawn from the records of
 * `days` in the ground truth: a user not erased yet, or a thread whose history the service
 * serves (so the erasure meets enrichment's rows) and of a user not erased.
 */
export async function forgetLane(o: {
  sim: Simulator;
  days: string[];
  seed: number;
  cliEnv: Record<string, string>;
  report: ForgetReport;
  began: number;
  over: () => boolean;
  /** The warehouse, to terminate an erasure's session from. */
  url: string;
  log: (line: string) => void;
}): Promise<void> {
  const rand = new Rng(o.seed ^ 0x6f726774);
  const records = o.days.flatMap((d) => o.sim.truth.exportDay(d));
  const users = new Set<string>();
  const threads = new Set<string>();
  if (records.length === 0) return;
  for (let i = 0; i < o.report.planned && !o.over(); i++) {
    await sleep(i === 0 ? rand.range(2000, 6000) : rand.range(3000, 20_000));
    if (o.over()) break;
    const kind = i % 2 === 0 ? 'user' : 'thread';
    // Drawn until one fits (reading a thread's history costs: not every record is tried).
    let r: (typeof records)[number] | undefined;
    for (let tries = 0; tries < 1000 && r === undefined; tries++) {
      const x = rand.pick(records);
      const fits =
        !users.has(x['User ID'].toLowerCase()) &&
        !threads.has(x['Thread ID'].toLowerCase()) &&
        (kind === 'user' ||
          (o.sim.truth.threadHistory(x['Thread ID']) !== undefined &&
            !o.sim.truth.isRestricted(x['Thread ID'])));
      if (fits) r = x;
    }
    if (r === undefined) break;
    const id = (kind === 'user' ? r['User ID'] : r['Thread ID']).toLowerCase();
    (kind === 'user' ? users : threads).add(id);
    let last = '';
    let attempts = 0;
    const strikeFirst = i === 0 || rand.chance(0.5);
    for (; attempts < ATTEMPTS; attempts++) {
      const run = runCli(o.cliEnv, ['forget', `--${kind}`, id, '--reason', `chaos ${i + 1}`, '--json']);
      if (attempts === 0 && strikeFirst) {
        o.report.watched++;
        if (await killInside(o.url, run)) o.report.killedMidErasure++;
      }
      const res = await run;
      if (res.code === 0) {
        const rows = Object.values((JSON.parse(res.out) as { rows: Record<string, number> }).rows).reduce(
          (a, b) => a + b,
          0,
        );
        const done: ErasureDone = { kind, id, atMs: Date.now() - o.began, attempts: attempts + 1, rows };
        o.report.erasures.push(done);
        o.log(
          `chaos: forget --${kind} ${id} (${i + 1}/${o.report.planned}) erased ${rows} rows at ` +
            `${Math.round(done.atMs / 1000)} s, attempt ${done.attempts}`,
        );
        break;
      }
      last = res.out.replace(/\s+/g, ' ').trim().slice(-300);
      await sleep(1000);
    }
    if (attempts === ATTEMPTS) {
      // Maybe erased, maybe not: expected erased all the same, and counted as a difference.
      o.report.erasures.push({ kind, id, atMs: Date.now() - o.began, attempts, rows: 0 });
      o.report.failed.push(`forget --${kind} ${id}: failed ${attempts} times, last: ${last}`);
    }
  }
}

/**
 * Terminates the erasure's session as soon as it is seen inside its transaction, polling while
 * `run` (the CLI) lasts; whether it did. One connection for the whole watch: an erasure's
 * transaction may last only tens of ms.
 */
async function killInside(url: string, run: Promise<unknown>): Promise<boolean> {
  let ended = false;
  void run.finally(() => {
    ended = true;
  });
  const c = new pg.Client({ connectionString: url, application_name: 'crs-chaos' });
  // The server may be down (a restart fault): then nothing is terminated.
  c.on('error', () => {});
  try {
    await c.connect();
    while (!ended) {
      const r = await c.query<{ n: number }>(
        `select count(*) filter (where pg_terminate_backend(pid))::int as n from pg_stat_activity
          where application_name like 'crs-sync%' and state <> 'idle' and query ~* $1`,
        [ERASURE_SQL.source],
      );
      if ((r.rows[0]?.n ?? 0) > 0) return true;
      await sleep(5);
    }
    return false;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => {});
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
