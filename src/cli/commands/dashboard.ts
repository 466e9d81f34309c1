import type { Command } from 'commander';
import { fileSettingOf, readNumber, withSecretFiles } from '../../config.ts';
import { HOSTS_SETTING, isLoopback, parseHostList, TOKEN_SETTING } from '../../dashboard/access.ts';
import {
  DEFAULT_DASHBOARD_PORT,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  startDashboard,
} from '../../dashboard/server.ts';
import { CrsError } from '../../errors.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';
import { releaseForeignExitHooks, stopSignal } from '../process-hooks.ts';

interface DashboardOptions {
  port: string;
  host: string;
}

const TIMEOUT_SETTING = 'CRS_DASHBOARD_STATEMENT_TIMEOUT_MS';
/** Shorter is guessable by trying; the setting is meant to be a generated secret. */
const MIN_TOKEN_CHARS = 16;

/** The dashboard's own settings, from the environment (and .env); a bad one exits 2 naming it. */
export function dashboardSettings(host: string, env: NodeJS.ProcessEnv = process.env) {
  // Or from the file CRS_DASHBOARD_TOKEN_FILE names (a Docker or Kubernetes secret).
  const fileSetting = fileSettingOf(TOKEN_SETTING);
  const token =
    withSecretFiles({ [TOKEN_SETTING]: env[TOKEN_SETTING], [fileSetting]: env[fileSetting] })[
      TOKEN_SETTING
    ] || undefined;
  if (!isLoopback(host) && !token) {
    throw new CrsError(
      'USAGE',
      `--host ${host} opens the dashboard beyond this machine, and it shows user ids, thread names and ` +
        `quarantined lines: set ${TOKEN_SETTING} (a secret of at least ${MIN_TOKEN_CHARS} characters, ` +
        `e.g. openssl rand -hex 24; or ${fileSetting}, a file that holds it), which every request must then carry`,
    );
  }
  if (token !== undefined && token.length < MIN_TOKEN_CHARS) {
    throw new CrsError('USAGE', `${TOKEN_SETTING} must be at least ${MIN_TOKEN_CHARS} characters long`);
  }
  // Blank is unset, decimal digits only: the rule of every numeric setting (src/config.ts).
  const timeout = readNumber(env[TIMEOUT_SETTING], { min: 100, max: 3_600_000, whole: true });
  if ('problem' in timeout)
    throw new CrsError('USAGE', `${TIMEOUT_SETTING}: ${timeout.problem} (milliseconds)`);
  return {
    token,
    allowedHosts: parseHostList(env[HOSTS_SETTING]),
    statementTimeoutMs: timeout.value ?? DEFAULT_STATEMENT_TIMEOUT_MS,
  };
}

/**
 * What the dashboard says when it is up: the address it bound (all of them, for 0.0.0.0 or ::)
 * and where to open it; with CRS_DASHBOARD_TOKEN set (required beyond loopback, honoured on
 * loopback too) that every page needs it; beyond loopback that it answers only to its address
 * and the names of CRS_DASHBOARD_ALLOWED_HOSTS.
 */
export function banner(
  host: string,
  dash: { url: string; listening: string },
  warehouse: string,
  token: boolean,
): string {
  const wildcard = host === '0.0.0.0' || host === '::' || host === '';
  const where = wildcard
    ? `listening on ${dash.listening} (every address of this machine; from here ${dash.url}/)`
    : `${dash.url}/`;
  const needs = token
    ? `; every request but /healthz needs ${TOKEN_SETTING} (a browser asks for it as the password, any user name)`
    : '';
  const beyond = isLoopback(host)
    ? ''
    : `; a host name it is reached by (DNS, a proxy) must be in ${HOSTS_SETTING}`;
  return `crs-sync dashboard: ${where} (warehouse ${warehouse})${needs}${beyond}; Ctrl-C stops it`;
}

export function registerDashboard(program: Command): void {
  program
    .command('dashboard')
    .summary('a local, read-only web dashboard of the data and of the sync’s health')
    .description(
      'Serves a read-only web dashboard over the warehouse until Ctrl-C: usage over time, users,\n' +
        'threads, citation sources (by type, over time) and sync health (watermark, lag, days by\n' +
        'status, failed days, held deletes, quarantine by error code with examples, enrichment\n' +
        'backlog, recent runs). Every page takes a date range in its address\n' +
        '(?from=YYYY-MM-DD&to=YYYY-MM-DD, UTC days), so a filtered page is a link you can share;\n' +
        'without one it shows the last 30 days of data. Each page has its data as JSON under /api/.\n\n' +
        'It needs no network access: the charts (uPlot) are served from the installed packages.\n' +
        'It only reads: every request runs in a read-only transaction, and it applies no\n' +
        'migration (run crs-sync migrate, or any sync, first). It reads the warehouse of\n' +
        'DATABASE_URL and CRS_SCHEMA, or the embedded PostgreSQL when DATABASE_URL is unset.\n' +
        'A query that fails shows what went wrong in place of its part of the page.\n\n' +
        `It answers only requests addressed to it (the Host it is bound to, or one of\n` +
        `${HOSTS_SETTING}); bound beyond loopback it needs ${TOKEN_SETTING}, sent as a bearer token\n` +
        `or basic auth's password (or ${TOKEN_SETTING}_FILE: the path of a file that holds it).\n` +
        `Each query is bounded by ${TIMEOUT_SETTING} (default ${DEFAULT_STATEMENT_TIMEOUT_MS}).`,
    )
    .option('--port <P>', 'port to listen on (0 = any free port)', String(DEFAULT_DASHBOARD_PORT))
    .option(
      '--host <H>',
      'address to bind; 127.0.0.1 keeps it on this machine, 0.0.0.0 opens it to the network ' +
        `(then ${TOKEN_SETTING} is required)`,
      '127.0.0.1',
    )
    .addHelpText(
      'after',
      '\nExamples:\n' +
        '  crs-sync dashboard                       # http://127.0.0.1:8787\n' +
        '  crs-sync dashboard --port 0              # any free port (printed)\n' +
        '  open "http://127.0.0.1:8787/health"      # is the warehouse current?\n' +
        '  curl "http://127.0.0.1:8787/api/usage?from=2026-11-01&to=2026-11-07"\n' +
        '  # on the network, reached as https://dash.example.com through a reverse proxy:\n' +
        `  ${TOKEN_SETTING}=$(openssl rand -hex 24) ${HOSTS_SETTING}=dash.example.com \\\n` +
        '    crs-sync dashboard --host 0.0.0.0\n' +
        `  (a request for a name the dashboard does not know is refused with 421: list every name it is\n` +
        `  reached by in ${HOSTS_SETTING}, comma-separated, name or name:port)`,
    )
    .action(async (opts: DashboardOptions) => {
      releaseForeignExitHooks();
      const port = Number(opts.port);
      if (!/^\d+$/.test(opts.port) || port > 65535) {
        throw new CrsError('USAGE', `--port must be an integer in 0..65535, got "${opts.port}"`);
      }
      const ctx = loadContext();
      const settings = dashboardSettings(opts.host);
      const wh = await openConfiguredWarehouse(ctx, { connections: 1, schema: 'current' });
      const dash = await startDashboard({
        pool: wh.warehouse.pool,
        host: opts.host,
        port,
        log: ctx.log,
        warehouse: wh.description,
        ...settings,
      }).catch(async (err: NodeJS.ErrnoException) => {
        await wh.close();
        if (err.code === 'EADDRINUSE' || err.code === 'EACCES' || err.code === 'EADDRNOTAVAIL') {
          throw new CrsError(
            'USAGE',
            `cannot listen on ${opts.host}:${port} (${err.code}); choose another --port (0 = any free port)`,
          );
        }
        throw err;
      });
      process.stdout.write(`${banner(opts.host, dash, wh.description, settings.token !== undefined)}\n`);
      await stopSignal();
      await dash.close();
      await wh.close();
    });
}
