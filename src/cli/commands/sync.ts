import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';

export function registerSync(program: Command): void {
  program
    .command('sync')
    .description('(not built yet)')
    .action(() => {
      throw new CrsError('USAGE', 'sync is not built yet');
    });
}
