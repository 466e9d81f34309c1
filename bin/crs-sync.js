#!/usr/bin/env -S node --
// The CLI is TypeScript run by Node 24's type stripping. Started by an older Node (a machine's
// own Node 20), this shim hands over to the project's pinned Node 24 from node_modules.
//
// Node reads an argument named `--env-file` as its own option wherever it stands, even after the
// script, and aborts with "not found" before any JavaScript runs (nodejs/node#54232); `sim
// --env-file PATH` names a file that does not exist yet. Node stops reading options at `--`, so
// the shebang and every re-execution put one before the script.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const candidates = [
    path.join(root, 'node_modules', 'node', 'bin', 'node'),
    path.join(root, 'node_modules', '.bin', 'node'),
  ];
  const node24 = candidates.find((p) => existsSync(p));
  if (!node24) {
    process.stderr.write(
      `crs-sync needs Node 24 or newer (this is ${process.version}). Run \`npm ci\` in ${root} to install the pinned Node 24.\n`,
    );
    process.exit(2);
  }
  const child = spawn(node24, ['--', fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: 'inherit',
  });
  // The command drains on a signal and exits when it is done; this process waits for that rather
  // than die at once and leave it running orphaned. Ctrl-C in a terminal reaches both processes
  // (one process group), so SIGINT is passed on only when it cannot have come from a terminal: a
  // second one would make a command stop at once.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      if (sig !== 'SIGINT' || !process.stdin.isTTY) child.kill(sig);
    });
  }
  child.on('error', (err) => {
    process.stderr.write(`crs-sync: cannot start ${node24}: ${err.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    }
    process.exit(code ?? 1);
  });
} else await import('../src/cli/main.ts');
