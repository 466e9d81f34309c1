import type { Command } from 'commander';
import { startSync } from '../../temporal/runs.ts';
import { checkRange, dayOption, positiveIntOption } from '../args.ts';
import { startAndFollow } from '../follow.ts';
import { releaseForeignExitHooks } from '../process-hooks.ts';

export function registerSync(program: Command): void {
  program
    .command('sync')
    .description(
      'sync a window of days through Temporal: by default from the ledger watermark minus ' +
        'CRS_LOOKBACK_DAYS to yesterday (UTC); follows progress until done unless --detach',
    )
    .option('--from <day>', 'first day (YYYY-MM-DD)')
    .option('--to <day>', 'last day (YYYY-MM-DD), default yesterday UTC')
    .option('--no-enrich', 'skip thread enrichment after the load')
    .option('--concurrency <n>', 'days loaded at once', '2')
    .option('--detach', 'start the run, print its workflow id and exit')
    .hook('preAction', () => releaseForeignExitHooks())
    .action(
      async (opts: {
        from?: string;
        to?: string;
        enrich: boolean;
        concurrency: string;
        detach?: boolean;
      }) => {
        const from = dayOption('--from', opts.from);
        const to = dayOption('--to', opts.to);
        checkRange(from, to);
        const concurrency = positiveIntOption('--concurrency', opts.concurrency, 64);
        await startAndFollow('started', opts.detach === true, (client, taskQueue) =>
          startSync(client, taskQueue, {
            ...(from ? { from } : {}),
            ...(to ? { to } : {}),
            enrich: opts.enrich,
            ...(concurrency ? { concurrency } : {}),
          }),
        );
      },
    );
}
