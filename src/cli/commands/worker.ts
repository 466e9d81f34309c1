import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';

export function registerWorker(program: Command): void {
  program
    .command('worker')
    .description('(not built yet)')
    .action(() => {
      throw new CrsError('USAGE', 'worker is not built yet');
    });
}
