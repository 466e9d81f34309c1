import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';

export function registerImport(program: Command): void {
  program
    .command('import')
    .description('(not built yet)')
    .action(() => {
      throw new CrsError('USAGE', 'import is not built yet');
    });
}
