import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('(not built yet)')
    .action(() => {
      throw new CrsError('USAGE', 'demo is not built yet');
    });
}
