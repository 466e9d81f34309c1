import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import pg from 'pg';
import { afterAll, expect, inject } from 'vitest';

/**
 * Runs before every test file of the unit and integration tiers (vitest.config.ts `setupFiles`)
 * and makes a file that reaches beyond its tier fail at once with what to do, instead of hanging
 * on a connection or quietly using whatever server the machine happens to run:
 * - unit: a PostgreSQL connection (any pg client or pool) fails;
 * - unit and integration: starting a child process fails (the CLI, a worker, promtool, an
 *   embedded PostgreSQL, the Temporal CLI), the TypeScript compiler's aside;
 * - Temporal: neither tier provides `temporalAddress`; test/temporal/harness.ts and
 *   test/helpers/tier.ts refuse without it.
 */
declare module 'vitest' {
  export interface ProvidedContext {
    tier: 'unit' | 'integration' | 'system';
  }
}

const tier = inject('tier');

function refusal(what: string): Error {
  const file = expect.getState().testPath ?? 'this test file';
  const move = tier === 'unit' ? 'INTEGRATION (PostgreSQL only) or SYSTEM' : 'SYSTEM';
  return new Error(
    `test tier "${tier}" has no ${what}: ${file} needs one. List the file under ${move} in test/tiers.ts.`,
  );
}

// The TypeScript compiler, which the architecture tests read the source with, runs as a child
// process of its own (scripts/lib/source-ast.ts): a static check, no service, so allowed.
const COMPILER = /[\\/]node_modules[\\/]@typescript[\\/]/;
const CHILD = ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'];

if (tier === 'unit' || tier === 'integration') {
  // Put back after the file: a worker process may go on to run a file of another tier.
  const cp = childProcess as unknown as Record<string, unknown>;
  const saved = { connect: pg.Client.prototype.connect, child: CHILD.map((n) => cp[n]) };
  afterAll(() => {
    pg.Client.prototype.connect = saved.connect;
    CHILD.forEach((n, i) => {
      cp[n] = saved.child[i];
    });
    syncBuiltinESMExports();
  });
  if (tier === 'unit') {
    // pg-pool connects its clients with a callback; kysely and the tests await a promise.
    pg.Client.prototype.connect = function refuse(callback?: (err: Error) => void): Promise<void> {
      const err = refusal('PostgreSQL');
      if (typeof callback === 'function') {
        process.nextTick(callback, err);
        return undefined as unknown as Promise<void>;
      }
      return Promise.reject(err);
    } as unknown as typeof pg.Client.prototype.connect;
  }
  CHILD.forEach((name, i) => {
    const original = saved.child[i] as (...args: unknown[]) => unknown;
    cp[name] = (...args: unknown[]) => {
      if (typeof args[0] === 'string' && COMPILER.test(args[0])) return original(...args);
      throw refusal(`child processes (${name} ${String(args[0])})`);
    };
  });
  // `import { spawn } from 'node:child_process'` reads the ES module's copy of the exports.
  syncBuiltinESMExports();
}
