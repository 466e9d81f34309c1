import type { Command } from 'commander';
import { grantReader } from '../../warehouse/privacy/reader.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';

/** `crs-sync grant-reader ROLE`. */
export function registerGrantReader(program: Command): void {
  program
    .command('grant-reader')
    .summary('give a database role read access to the data, not to the bookkeeping or the quarantine')
    .description(
      'Give ROLE (which must exist) read access to the data schema (CRS_SCHEMA): the data tables, ' +
        'sync_days and sync_runs, the rollups and the views, now and as later migrations add them. ' +
        "Nothing of the internal schema (<schema>_internal: the loader's state, the request budget, " +
        'alert state, erasures and the quarantine, whose rows are lines as received). Run it as the ' +
        'role that runs the migrations. A BI tool, dbt or the dashboard can then connect as ROLE ' +
        '(docs/privacy.md).',
    )
    .argument('<role>', 'the database role to give read access')
    .addHelpText(
      'after',
      '\nExample:\n' +
        '  psql "$DATABASE_URL" -c "create role bi_reader login password \'…\'"\n' +
        '  crs-sync grant-reader bi_reader',
    )
    .action(async (role: string) => {
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1 });
      try {
        const r = await grantReader(wh.warehouse, role);
        process.stdout.write(
          `${role} may read schema ${r.schema} (tables and views, present and future); ` +
            `not ${r.internal} (bookkeeping and the quarantine)\n`,
        );
      } finally {
        await wh.close();
      }
    });
}
