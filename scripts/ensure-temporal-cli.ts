// Prints the path of a Temporal CLI, installing the pinned one into .tools/ when none is found.
import { ensureTemporalCli } from '../src/temporal/cli-binary.ts';

const found = await ensureTemporalCli((m) => process.stderr.write(`${m}\n`));
if (!found) {
  process.stderr.write('no Temporal CLI found or installable; the SDK will try its own download\n');
  process.exit(1);
}
process.stdout.write(`${found}\n`);
