import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';
import { connectClient } from '../../temporal/connection.ts';
import { startBackfill } from '../../temporal/runs.ts';
import { checkRange, dayOption, positiveIntOption } from '../args.ts';
import { loadContext } from '../context.ts';
import { followWithProgress } from '../follow.ts';
import { releaseForeignExitHooks } from '../process-hooks.ts';

export function registerBackfill(program: Command): void {
  program
    .command('backfill')
    .description(
      'load every day of a range through Temporal, N days at a time; running the same range again ' +
        'follows the backfill already running',
    )
    .requiredOption('--from <day>', 'first day (YYYY-MM-DD)')
    .requiredOption('--to <day>', 'last day (YYYY-MM-DD)')
    .option('--concurrency <n>', 'days loaded at once', '4')
    .option('--no-enrich', 'skip thread enrichment')
    .option('--days-per-run <n>', 'days per workflow run before it continues as new', '100')
    .option('--detach', 'start the backfill, print its workflow id and exit')
    .hook('preAction', () => releaseForeignExitHooks())
    .action(
      async (opts: {
        from: string;
        to: string;
        concurrency: string;
        enrich: boolean;
        daysPerRun: string;
        detach?: boolean;
      }) => {
        const from = dayOption('--from', opts.from);
        const to = dayOption('--to', opts.to);
        if (!from || !to) throw new CrsError('USAGE', '--from and --to are required');
        checkRange(from, to);
        const concurrency = positiveIntOption('--concurrency', opts.concurrency, 64);
        const daysPerRun = positiveIntOption('--days-per-run', opts.daysPerRun, 1000);
        const ctx = loadContext();
        const t = await connectClient(ctx.config.temporal);
        try {
          const handle = await startBackfill(t.client, ctx.config.temporal.taskQueue, {
            from,
            to,
            enrich: opts.enrich,
            ...(concurrency ? { concurrency } : {}),
            ...(daysPerRun ? { daysPerRun } : {}),
          });
          process.stderr.write(
            `backfill ${handle.workflowId} on task queue ${ctx.config.temporal.taskQueue}\n`,
          );
          if (opts.detach) {
            process.stdout.write(`${handle.workflowId}\n`);
            return;
          }
          await followWithProgress(t.client, handle);
        } finally {
          await t.close();
        }
      },
    );
}
