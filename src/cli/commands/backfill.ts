import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';

export function registerBackfill(program: Command): void {
  program
    .command('backfill')
    .description('(not built yet)')
    .action(() => {
      throw new CrsError('USAGE', 'backfill is not built yet');
    });
}
