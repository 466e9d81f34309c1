// Prints the path of the dbt the example project (examples/dbt) and its test run, installing the
// pinned one (examples/dbt/requirements.txt) into a virtual environment under .tools/ when it is
// not there yet. PyPI is the only channel this project's machines reach; a venv keeps it off the
// machine's Python.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { accessSync, constants, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const requirements = path.join(root, 'examples', 'dbt', 'requirements.txt');
// The folder is named by the pins' digest, so a changed pin installs afresh.
const digest = createHash('sha256').update(readFileSync(requirements)).digest('hex').slice(0, 12);
const venv = path.join(root, '.tools', `dbt-${digest}`);
const dbt = path.join(venv, 'bin', 'dbt');

function executable(p: string): boolean {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

if (!executable(dbt)) {
  process.stderr.write(
    `installing dbt (${path.relative(root, requirements)}) into ${path.relative(root, venv)}\n`,
  );
  rmSync(venv, { recursive: true, force: true });
  try {
    // pip's output only when it fails: a machine's pip configuration may warn once a package.
    execFileSync('python3', ['-m', 'venv', venv], { stdio: 'pipe' });
    execFileSync(
      path.join(venv, 'bin', 'pip'),
      ['install', '-q', '--disable-pip-version-check', '-r', requirements],
      {
        stdio: 'pipe',
      },
    );
  } catch (e) {
    rmSync(venv, { recursive: true, force: true });
    const err = e as Error & { stderr?: Buffer };
    process.stderr.write(`could not install dbt: ${err.message}\n${err.stderr?.toString() ?? ''}`);
    process.exit(1);
  }
}
process.stdout.write(`${dbt}\n`);
