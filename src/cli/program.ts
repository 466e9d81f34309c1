import { Command, CommanderError } from 'commander';
import { terminalText } from '../common/terminal-text.ts';
import { EXIT_FAILURE, EXIT_USAGE, errorMessage, isCrsError } from '../errors.ts';
import { redactText } from '../log.ts';

/** A stack trace is for whoever debugs: shown with LOG_LEVEL=debug (or trace) only. */
function describeUnexpected(err: unknown): string {
  const level = (process.env.LOG_LEVEL ?? '').toLowerCase();
  const stack = err instanceof Error && (level === 'debug' || level === 'trace') ? err.stack : undefined;
  return terminalText(redactText(stack ?? (errorMessage(err) || String(err))));
}

// The last resort for what no command catches (a stream's 'error' event nobody listens to, a
// promise a library leaves rejected): one line and exit status 1 instead of Node's stack dump.
for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(event, (err: unknown) => {
    process.stderr.write(`crs-sync: unexpected error: ${describeUnexpected(err)}\n`);
    process.exit(EXIT_FAILURE);
  });
}
// A signal no command listens for (a short command, or one still starting): one line and exit
// status 1, the embedded PostgreSQL stopped on the way out (src/warehouse/embedded.ts). A command
// that drains (worker, sim, import, demo, an attached sync) listens itself; this stands aside.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (process.listenerCount(signal) > 1) return;
    process.stderr.write(`crs-sync: interrupted by ${signal}\n`);
    process.exit(EXIT_FAILURE);
  });
}
// Whoever reads the output went away (`crs-sync … | head`): nothing is left to say to them.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}

/**
 * The commands, each loaded only when it runs: a command's module pulls in what it needs (the
 * loader, the Temporal SDK, the simulator), and loading every one of them cost each command a
 * second and ~50 MB before it began. `--help` without a command loads them all.
 */
const COMMANDS: Record<string, (program: Command) => Promise<void>> = {
  migrate: async (p) => (await import('./commands/migrate.ts')).registerMigrate(p),
  import: async (p) => (await import('./commands/import.ts')).registerImport(p),
  status: async (p) => (await import('./commands/status.ts')).registerStatus(p),
  rejects: async (p) => (await import('./commands/rejects.ts')).registerRejects(p),
  deletes: async (p) => (await import('./commands/deletes.ts')).registerDeletes(p),
  sim: async (p) => (await import('./commands/sim.ts')).registerSim(p),
  worker: async (p) => (await import('./commands/worker.ts')).registerWorker(p),
  sync: async (p) => (await import('./commands/sync.ts')).registerSync(p),
  backfill: async (p) => (await import('./commands/backfill.ts')).registerBackfill(p),
  schedule: async (p) => (await import('./commands/schedule.ts')).registerSchedule(p),
  demo: async (p) => (await import('./commands/demo.ts')).registerDemo(p),
  dashboard: async (p) => (await import('./commands/dashboard.ts')).registerDashboard(p),
  rollups: async (p) => (await import('./commands/rollups.ts')).registerRollups(p),
  alerts: async (p) => (await import('./commands/alerts.ts')).registerAlerts(p),
  schema: async (p) => (await import('./commands/schema.ts')).registerSchema(p),
};

const program = new Command('crs-sync')
  .description(
    'Keeps a PostgreSQL warehouse in step with a Conversational Research Service.\n' +
      'Configuration comes from the environment (a .env file in the working directory is read);\n' +
      'see the README for every variable. Exit status: 0 success, 1 failure, 2 bad usage or configuration.',
  )
  .showHelpAfterError('(run with --help for usage)')
  .exitOverride();

try {
  const named = COMMANDS[process.argv[2] ?? ''];
  if (named) await named(program);
  else for (const register of Object.values(COMMANDS)) await register(program);
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // --help and --version end here with exit code 0; usage errors were already printed.
    process.exitCode = err.exitCode === 0 ? 0 : EXIT_USAGE;
  } else if (isCrsError(err)) {
    // A configuration problem names a variable and a rule, never a value; masking would turn
    // "CRS_CLIENT_SECRET: required …" into "CRS_CLIENT_SECRET: [redacted] …".
    const text = err.code === 'CONFIG_INVALID' ? err.message : redactText(err.message);
    // A message may quote data (a path, a server's answer): no control character of it reaches the terminal raw.
    process.stderr.write(`crs-sync: ${terminalText(text)}\n`);
    process.exitCode = err.code === 'CONFIG_INVALID' || err.code === 'USAGE' ? EXIT_USAGE : EXIT_FAILURE;
  } else {
    process.stderr.write(`crs-sync: unexpected error: ${describeUnexpected(err)}\n`);
    process.exitCode = EXIT_FAILURE;
  }
}
