import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';
import { applyRetention } from '../../warehouse/privacy/retention.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';
import { printRows } from '../output.ts';

async function runApply(o: { dryRun?: boolean; json?: boolean }): Promise<void> {
  const ctx = loadContext();
  const days = ctx.config.textRetentionDays;
  if (days === undefined)
    throw new CrsError(
      'USAGE',
      'CRS_TEXT_RETENTION_DAYS is not set: text is kept, and there is nothing to apply',
    );
  const wh = await openConfiguredWarehouse(ctx, { connections: 2 });
  try {
    const r = await applyRetention(wh.warehouse.pool, days, { dryRun: o.dryRun === true });
    const rows = Object.entries(r.rows);
    printRows(rows, {
      json: o.json,
      asJson: { document: { ...r, retentionDays: days } },
      none: '',
      head: ['table', r.dryRun ? 'rows whose text would be cleared' : 'rows whose text was cleared'],
      cells: ([t, n]) => [t, n],
    });
    if (!o.json)
      process.stdout.write(
        `\ntext before ${r.before} (CRS_TEXT_RETENTION_DAYS=${days})${r.dryRun ? ': dry run, nothing cleared' : ' cleared; rows and figures kept'}\n`,
      );
  } finally {
    await wh.close();
  }
}

/** `crs-sync retention apply`. */
export function registerRetention(program: Command): void {
  const retention = program
    .command('retention')
    .summary('clear the text of conversations older than CRS_TEXT_RETENTION_DAYS')
    .description(
      'With CRS_TEXT_RETENTION_DAYS=N, the text of export rows (input, response), history entries, ' +
        'citation summaries and artifact values older than N days is cleared. The rows stay, and so do ' +
        'every count, response_chars, the rollups and the views. See docs/privacy.md.',
    );
  retention
    .command('apply')
    .summary('clear the text past retention now')
    .description(
      'clear the text older than CRS_TEXT_RETENTION_DAYS days (by UTC day for export rows, by when ' +
        'the entry was written for history, citations and artifacts), in one transaction with the rollups',
    )
    .option('--dry-run', 'count the rows whose text would be cleared; change nothing')
    .option('--json', 'print JSON')
    .action(runApply);
}
