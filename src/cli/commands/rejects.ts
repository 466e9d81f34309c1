import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';

export function registerRejects(program: Command): void {
  program
    .command('rejects')
    .description('(not built yet)')
    .action(() => {
      throw new CrsError('USAGE', 'rejects is not built yet');
    });
}
