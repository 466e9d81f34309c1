import { Command, CommanderError } from 'commander';
import { EXIT_FAILURE, EXIT_USAGE, isCrsError } from '../errors.ts';
import { redactText } from '../log.ts';
import { registerBackfill } from './commands/backfill.ts';
import { registerDemo } from './commands/demo.ts';
import { registerImport } from './commands/import.ts';
import { registerMigrate } from './commands/migrate.ts';
import { registerRejects } from './commands/rejects.ts';
import { registerSchedule } from './commands/schedule.ts';
import { registerSim } from './commands/sim.ts';
import { registerStatus } from './commands/status.ts';
import { registerSync } from './commands/sync.ts';
import { registerWorker } from './commands/worker.ts';

const program = new Command('crs-sync')
  .description(
    'Keeps a PostgreSQL warehouse in step with a Conversational Research Service.\n' +
      'Configuration comes from the environment (a .env file in the working directory is read);\n' +
      'see the README for every variable. Exit status: 0 success, 1 failure, 2 bad usage or configuration.',
  )
  .showHelpAfterError('(run with --help for usage)')
  .exitOverride();

registerMigrate(program);
registerImport(program);
registerStatus(program);
registerRejects(program);
registerSim(program);
registerWorker(program);
registerSync(program);
registerBackfill(program);
registerSchedule(program);
registerDemo(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // --help and --version end here with exit code 0; usage errors were already printed.
    process.exitCode = err.exitCode === 0 ? 0 : EXIT_USAGE;
  } else if (isCrsError(err)) {
    process.stderr.write(`crs-sync: ${redactText(err.message)}\n`);
    process.exitCode = err.code === 'CONFIG_INVALID' || err.code === 'USAGE' ? EXIT_USAGE : EXIT_FAILURE;
  } else {
    const e = err as Error;
    process.stderr.write(`crs-sync: unexpected error: ${redactText(e?.stack ?? String(err))}\n`);
    process.exitCode = EXIT_FAILURE;
  }
}
