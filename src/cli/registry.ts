import { Command } from 'commander';
import { secretFileSettings, wrapList } from '../config.ts';

/**
 * The commands, each loaded only when it runs: a command's module pulls in what it needs (the
 * loader, the Temporal SDK, the simulator), and loading every one of them cost each command a
 * second and ~50 MB before it began. `--help` without a command loads them all.
 */
export const COMMANDS: Record<string, (program: Command) => Promise<void>> = {
  migrate: async (p) => (await import('./commands/migrate.ts')).registerMigrate(p),
  import: async (p) => (await import('./commands/import.ts')).registerImport(p),
  status: async (p) => (await import('./commands/status.ts')).registerStatus(p),
  rejects: async (p) => (await import('./commands/rejects.ts')).registerRejects(p),
  deletes: async (p) => (await import('./commands/deletes.ts')).registerDeletes(p),
  sim: async (p) => (await import('./commands/sim.ts')).registerSim(p),
  worker: async (p) => (await import('./commands/worker.ts')).registerWorker(p),
  sync: async (p) => (await import('./commands/sync.ts')).registerSync(p),
  backfill: async (p) => (await import('./commands/backfill.ts')).registerBackfill(p),
  cancel: async (p) => (await import('./commands/cancel.ts')).registerCancel(p),
  schedule: async (p) => (await import('./commands/schedule.ts')).registerSchedule(p),
  demo: async (p) => (await import('./commands/demo.ts')).registerDemo(p),
  dashboard: async (p) => (await import('./commands/dashboard.ts')).registerDashboard(p),
  rollups: async (p) => (await import('./commands/rollups.ts')).registerRollups(p),
  alerts: async (p) => (await import('./commands/alerts.ts')).registerAlerts(p),
  schema: async (p) => (await import('./commands/schema.ts')).registerSchema(p),
  forget: async (p) => (await import('./commands/forget.ts')).registerForget(p),
  retention: async (p) => (await import('./commands/retention.ts')).registerRetention(p),
  'grant-reader': async (p) => (await import('./commands/grant-reader.ts')).registerGrantReader(p),
};

/** Columns help is laid out in: the longest line a description is written with, and room for its indent. */
const HELP_WIDTH = 120;

/** The program without its commands (program.ts registers the one that runs, or all for --help). */
export function createProgram(): Command {
  return (
    new Command('crs-sync')
      .description(
        'Keeps a PostgreSQL warehouse in step with a Conversational Research Service.\n' +
          'Configuration comes from the environment (a .env file in the working directory is read);\n' +
          'see the README for every variable. Exit status: 0 success, 1 failure, 2 bad usage or configuration.\n' +
          'A secret may be given as a file instead (Docker and Kubernetes secrets), its path in NAME_FILE:\n' +
          `${wrapList(secretFileSettings(), 100)}.\n` +
          'One line end at the end of the file is not part of the secret; NAME and NAME_FILE both set exit 2.\n' +
          "The service's credentials are read again from their files when the service refuses them (rotation).",
      )
      // Descriptions are written as lines of up to ~110 characters; commander would cut each again
      // at the terminal's width (80 on a pipe), leaving one- or two-word lines mid-sentence. A
      // narrower terminal wraps the long lines itself.
      .configureHelp({ helpWidth: Math.max(HELP_WIDTH, process.stdout.columns ?? 0) })
      .showHelpAfterError('(run with --help for usage)')
      .exitOverride()
  );
}
