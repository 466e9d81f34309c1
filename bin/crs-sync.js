#!/usr/bin/env -S node --
// The CLI is TypeScript run by Node 24's type stripping. Started by an older Node (a machine's
// own Node 20), this shim hands over to the project's pinned Node 24 from node_modules.
//
// Node reads an argument named `--env-file` as its own option wherever it stands, even after the
// script, and aborts with "not found" before any JavaScript runs (nodejs/node#54232); `sim
// --env-file PATH` names a file that does not exist yet. Node stops reading options at `--`, so
// the shebang and every re-execution put one before the script.
import { spawnSync } from 'node:child_process';
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
  const r = spawnSync(node24, ['--', fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: 'inherit',
  });
  if (r.signal) process.kill(process.pid, r.signal);
  process.exit(r.status ?? 1);
}
await import('../src/cli/main.ts');
