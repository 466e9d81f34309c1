import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';

export function registerSchedule(program: Command): void {
  program
    .command('schedule')
    .description('(not built yet)')
    .action(() => {
      throw new CrsError('USAGE', 'schedule is not built yet');
    });
}
