import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';

export function registerStatus(program: Command): void {
  program
    .command('status')
    .description('(not built yet)')
    .action(() => {
      throw new CrsError('USAGE', 'status is not built yet');
    });
}
