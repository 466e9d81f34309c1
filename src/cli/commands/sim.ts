import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';

export function registerSim(program: Command): void {
  program
    .command('sim')
    .description('(not built yet)')
    .action(() => {
      throw new CrsError('USAGE', 'sim is not built yet');
    });
}
