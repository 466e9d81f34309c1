import { describe, expect, it } from 'vitest';
import { formatReport, runChaos } from '../../bench/lib/chaos/run.ts';
import { testSeed } from '../helpers/seed.ts';

/**
 * The short chaos run: the same harness as `npm run chaos` (its own PostgreSQL cluster, its own
 * Temporal dev server, real worker processes, the simulator over HTTP), with 2 workers, 3 days
 * and a fault of each kind. The seed is printed; CHAOS_SEED replays a run. It waits on progress:
 * the chaos phase ends when every kind of fault has struck (`minutes` is only a safety net for a
 * run that stopped moving, and the test fails if it was what ended the phase); each later step
 * ends when its runs end.
 */
describe('chaos (short run)', () => {
  it('when workers, database sessions and the warehouse are killed and the service faults during a backfill and intraday pulls, and a user and a thread are forgotten meanwhile, then after a clean pass the warehouse equals the service without them row by row, no table names them, deletes held then seen again delete nothing the service holds, and each intraday pull leaves the open day equal to its export so far', async () => {
    const seed = testSeed(20261128, 'CHAOS_SEED');
    process.stderr.write(`chaos test seed ${seed} (CHAOS_SEED=${seed} replays it)\n`);
    const report = await runChaos({
      seed,
      days: 3,
      recordsPerDay: 150,
      workers: 2,
      faultsPerKind: 1,
      // A net, not the plan: the phase ends once every kind has struck (40 s at a load of 7 on
      // 2 cores), and the test fails if this ended it.
      minutes: 6,
      // One of each way the day is loaded again.
      heldRounds: 3,
      // One of each of the harness's faults the intraday pulls meet.
      intradayPulls: 3,
      // A user and a thread, erased while the passes load under faults.
      forget: 2,
      // A day load struck by a fault is tried again 1 s later, doubling (the policy's 5 s would
      // leave each pass waiting out 5, 10, 20 s for a worker's next attempt). Twelve attempts
      // still span about 18 minutes: far longer than any fault, so no retrying day is paged.
      retryInterval: '1s',
      log: (line) => process.stderr.write(`${line}\n`),
    });
    process.stderr.write(`${formatReport(report)}\n`);
    // The run really was hostile: every kind of fault struck, the harness's and the service's.
    expect(report.shortOfQuota).toEqual([]);
    expect(report.injected['worker-kill']).toBeGreaterThan(0);
    expect(report.injected['db-restart']).toBeGreaterThan(0);
    // Poison the service holds (lines, entries, artifacts), all of which must end quarantined.
    expect(report.comparison.compared.rejected_records).toBeGreaterThan(0);
    expect(report.comparison.compared.analytics_messages).toBeGreaterThan(300);
    expect(report.deletedByFaults).toEqual([]);
    // An over-long line whose id lies beyond its kept prefix, in a complete export, deletes nothing.
    expect(report.lateId).toEqual([]);
    // Deletes held by a partial export, the day loaded again in full, then `deletes apply`: no row
    // the service holds is deleted, and every round really held deletes.
    expect(report.heldSeen.rounds).toBe(3);
    expect(report.heldSeen.held).toBeGreaterThan(0);
    expect(report.heldSeen.deletedInSource).toEqual([]);
    expect(report.heldSeen.problems).toEqual([]);
    // The open day pulled three times under faults, then closed: each check found its rows.
    expect(report.intraday.pulledAt).toHaveLength(4);
    expect(report.intraday.rowsPerPull.every((n) => n > 0)).toBe(true);
    expect(Object.keys(report.intraday.injected)).toEqual(
      expect.arrayContaining(['worker-kill', 'db-kill-loader', 'db-restart']),
    );
    expect(report.intraday.differences).toEqual([]);
    // Both erasures made during the faulted passes; afterwards, through the clean pass, the later
    // steps' re-pulls and imports and the intraday pulls, no table names an erased id, and the
    // rest equals the service without them (the comparison's `erased` row and every other).
    expect(report.forget.erasures.map((e) => e.kind)).toEqual(['user', 'thread']);
    expect(report.forget.erasures.every((e) => e.atMs < report.chaosPhaseMs)).toBe(true);
    expect(report.forget.failed).toEqual([]);
    // The first erasure was watched, to be terminated inside its transaction (whether the kill
    // landed before it committed is timing: printed in the report, not asserted).
    expect(report.forget.watched).toBeGreaterThan(0);
    expect(report.comparison.compared.erased).toBeGreaterThan(2);
    expect(report.erasedAtEnd).toEqual([]);
    expect(report.comparison.differences).toEqual(
      Object.fromEntries(Object.keys(report.comparison.differences).map((t) => [t, []])),
    );
    expect(report.cleanPassFailedDays).toEqual([]);
    // Every day_failed page named a day a pass saw fail: the faults are transient, shorter than the
    // retry window, so a retrying day is never paged as failed.
    expect(report.falsePages).toEqual([]);
    expect(report.workerDeaths.otherExits).toEqual([]);
  }, 600_000);
});
