import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('(not built yet)')
    .action(() => {
      throw new CrsError('USAGE', 'migrate is not built yet');
    });
}
