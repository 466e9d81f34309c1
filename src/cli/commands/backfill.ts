import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';
import { startBackfill } from '../../temporal/runs.ts';
import { checkRange, dayOption, positiveIntOption } from '../args.ts';
import { startAndFollow } from '../follow.ts';
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
        await startAndFollow('backfill', opts.detach === true, (client, taskQueue) =>
          startBackfill(client, taskQueue, {
            from,
            to,
            enrich: opts.enrich,
            ...(concurrency ? { concurrency } : {}),
            ...(daysPerRun ? { daysPerRun } : {}),
          }),
        );
      },
    );
}
