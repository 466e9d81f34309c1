import type { Command } from 'commander';
import { migrateToLatest } from '../../warehouse/migrator.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .summary('apply the warehouse migrations (idempotent, safe to run concurrently)')
    .description(
      'Creates the schema named by CRS_SCHEMA (default crs) and brings it to the latest migration.\n' +
        'Idempotent, and safe to run from several processes at once (an advisory lock serialises them).\n' +
        'Without DATABASE_URL it migrates the embedded PostgreSQL in .data/postgres.',
    )
    .action(async () => {
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { schema: 'as-is', connections: 1 });
      try {
        const r = await migrateToLatest(wh.warehouse);
        if (r.applied.length === 0) {
          process.stdout.write(`warehouse ${wh.description}: up to date (${r.alreadyApplied} migrations)\n`);
        } else {
          process.stdout.write(`warehouse ${wh.description}: applied ${r.applied.join(', ')}\n`);
        }
      } finally {
        await wh.close();
      }
    });
}
