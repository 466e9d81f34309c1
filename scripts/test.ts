// `npm test`: every tier, the system tier beside the other two.
//
// vitest runs one group of projects at a time, with one worker count per group, so in one vitest
// process the system tier (one file at a time: dev server, worker processes, clusters, a browser)
// could only start once the unit and integration tiers (two files at a time) had ended. Those two
// mostly wait on PostgreSQL and HTTP, so they run in a vitest process of their own beside the
// system tier's; system files still never run beside each other. The system tier's output streams
// as it comes; the other process's is printed whole when it ends (scripts/lib/beside.ts).
//
// With arguments (`npm test -- test/ingest/import.test.ts`, `npm test -- --project unit`) it is
// plain `vitest run` with them.
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/warehouse/embedded.ts';
import { chooseTestDatabase, databaseAnswers } from '../test/helpers/test-database.ts';
import { countsOf, type Outcome, runBeside } from './lib/beside.ts';

const root = path.resolve(import.meta.dirname, '..');
const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs');
const args = process.argv.slice(2);

if (args.length > 0) {
  const child = spawn(process.execPath, [vitest, 'run', ...args], { cwd: root, stdio: 'inherit' });
  child.on('close', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
} else {
  process.exit(await all());
}

async function all(): Promise<number> {
  // Both processes use one PostgreSQL: when none answers, the embedded one is started here (each
  // process's global setup would otherwise start its own, in the same folder).
  const url = await chooseTestDatabase(databaseAnswers);
  const embedded = url
    ? undefined
    : await startEmbeddedPostgres({
        dir: path.join(root, '.data', 'test-postgres'),
        persistent: false,
        unsafeNoFsync: true,
      });
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TEST_DATABASE_URL: url ?? embedded?.url,
    // Colours as the terminal would show them, though the output passes through pipes.
    ...(process.stdout.isTTY && !process.env.NO_COLOR ? { FORCE_COLOR: '1' } : {}),
  };
  const started = Date.now();
  const vitestRun = (name: string, projects: string[], own: NodeJS.ProcessEnv = {}) => ({
    name,
    file: process.execPath,
    args: [vitest, 'run', ...projects.flatMap((p) => ['--project', p])],
    env: own,
  });
  // The system tier's files (one at a time) are the longest part of the run: the other two tiers
  // get the cores it leaves, so that on 2 cores three test processes do not share two.
  const beside = String(Math.max(1, availableParallelism() - 1));
  try {
    const outcomes = await runBeside(
      vitestRun('the system tier', ['system']),
      vitestRun('the unit and integration tiers', ['unit', 'integration'], { CRS_TEST_WORKERS: beside }),
      { cwd: root, env, out: process.stdout },
    );
    const seconds = Math.round((Date.now() - started) / 1000);
    const word = (o: Outcome) =>
      `${o.name}: ${o.code === 0 ? 'passed' : `FAILED (exit ${o.code})`}${o.tests ? `, tests ${o.tests}` : ''}`;
    process.stdout.write(`npm test, ${seconds} s. ${outcomes.map(word).join('; ')}\n`);
    // One plain line of counts over both processes (CI prints it last).
    const sum = outcomes.map((o) => countsOf(o.tests));
    const total = (k: 'passed' | 'failed' | 'skipped') => sum.reduce((a, c) => a + c[k], 0);
    process.stdout.write(
      `tests: ${total('passed')} passed, ${total('failed')} failed, ${total('skipped')} skipped\n`,
    );
    return outcomes.find((o) => o.code !== 0)?.code ?? 0;
  } finally {
    await embedded?.stop();
  }
}
