import { CommanderError } from 'commander';
import { terminalText } from '../common/terminal-text.ts';
import { EXIT_FAILURE, EXIT_USAGE, errorMessage, isCrsError } from '../errors.ts';
import { redactText } from '../log.ts';
import { COMMANDS, createProgram } from './registry.ts';

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

const program = createProgram();

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
