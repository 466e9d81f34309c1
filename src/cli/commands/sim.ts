import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { CrsError, errorMessage } from '../../errors.ts';
import {
  DEFAULT_DAYS,
  DEFAULT_RECORDS_PER_DAY,
  DEFAULT_SEED,
  FAULT_SPEC_HELP,
  parseFaultSpec,
  startSimulator,
} from '../../simulator/index.ts';
import { releaseForeignExitHooks, stopSignal } from '../process-hooks.ts';

interface SimOptions {
  port: string;
  host: string;
  seed: string;
  days: string;
  recordsPerDay: string;
  faults?: string;
  envFile?: string;
  envOut?: string;
  admin?: boolean;
}

function intOption(name: string, value: string, min: number, max: number): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max) {
    throw new CrsError('USAGE', `--${name} must be an integer in ${min}..${max}, got "${value}"`);
  }
  return n;
}

/** .env form; values are quoted only when they need it. */
function envText(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `${k}=${/^[A-Za-z0-9_./:@+=-]*$/.test(v) ? v : JSON.stringify(v)}`)
    .join('\n');
}

export function registerSim(program: Command): void {
  program
    .command('sim')
    .description(
      'Run the service simulator (a local stand-in for the Conversational Research Service, not the real one).\n' +
        'Prints the CRS_* variables a client needs, then serves until SIGINT/SIGTERM.',
    )
    .option('--port <P>', 'port to listen on (0 = any free port)', '8080')
    .option('--host <H>', 'address to bind', '127.0.0.1')
    .option('--seed <S>', 'seed of the deterministic data set', String(DEFAULT_SEED))
    .option('--days <N>', 'days of data before today (UTC)', String(DEFAULT_DAYS))
    .option('--records-per-day <N>', 'approximate export records per day', String(DEFAULT_RECORDS_PER_DAY))
    .option('--faults <SPEC>', 'faults to inject (see below)')
    .option('--admin', 'serve GET/PUT /_sim/faults and GET /_sim/counts: switch faults from another process')
    .option('--env-file <PATH>', 'also write the variables to PATH in .env form')
    .option(
      '--env-out <PATH>',
      'the same as --env-file. A Node program in front of crs-sync (npx, `node bin/crs-sync.js`) reads ' +
        'an argument named --env-file itself and aborts with "not found" when PATH does not exist yet ' +
        '(nodejs/node#54232); this name, or `npx -- crs-sync …`, avoids that',
    )
    .addHelpText(
      'after',
      `\n${FAULT_SPEC_HELP}\n\nThe OpenAPI document is served at {CRS_BASE_URL}/openapi.json.`,
    )
    .action(async (opts: SimOptions) => {
      // Another module's exit hooks would end the process at once on SIGINT/SIGTERM (and with
      // status 0 on any error); the simulator closes its server itself.
      releaseForeignExitHooks();
      const port = intOption('port', opts.port, 0, 65535);
      const seed = intOption('seed', opts.seed, 0, 4294967295);
      const days = intOption('days', opts.days, 0, 3650);
      const recordsPerDay = intOption('records-per-day', opts.recordsPerDay, 0, 50_000_000);
      let faults: ReturnType<typeof parseFaultSpec>;
      try {
        faults = parseFaultSpec(opts.faults);
      } catch (err) {
        throw new CrsError('USAGE', `--faults: ${(err as Error).message}`);
      }
      const envFile = opts.envOut ?? opts.envFile;
      const sim = await startSimulator({
        port,
        host: opts.host,
        seed,
        days,
        recordsPerDay,
        faults,
        admin: opts.admin ?? false,
      }).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'EADDRINUSE' || err.code === 'EACCES' || err.code === 'EADDRNOTAVAIL') {
          throw new CrsError(
            'USAGE',
            `cannot listen on ${opts.host}:${port} (${err.code}); choose another --port (0 = any free port)`,
          );
        }
        throw err;
      });
      // Listening before the variables are printed: whoever reads them may stop the simulator at once.
      const stopped = stopSignal();
      const env = envText(sim.env());
      if (envFile) {
        try {
          await writeFile(envFile, `${env}\n`, { mode: 0o600 });
        } catch (err) {
          await sim.close();
          throw new CrsError('INPUT_UNREADABLE', `cannot write ${envFile}: ${errorMessage(err)}`);
        }
      }
      process.stdout.write(
        `# crs-sync service simulator (seed ${seed}, ${days} days, ~${recordsPerDay} records/day` +
          `${opts.faults ? `, faults ${opts.faults}` : ''})\n` +
          `# OpenAPI: ${sim.baseUrl}/openapi.json${envFile ? `; variables written to ${envFile}` : ''}\n` +
          `${env}\n`,
      );
      await stopped;
      await sim.close();
      process.stderr.write('crs-sync sim: stopped\n');
    });
}
