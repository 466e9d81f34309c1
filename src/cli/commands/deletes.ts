import type { Command } from 'commander';
import { CrsError } from '../../errors.ts';
import { applyHeldDeletes, heldIds, listHeldDeletes } from '../../warehouse/held-deletes.ts';
import { refreshRollups } from '../../warehouse/rollups/refresh.ts';
import { checkedDay } from '../args.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';
import { printRows } from '../output.ts';

const checkDay = (v: string): string => checkedDay('--day', v);

/** `crs-sync deletes list|apply`. Long: one commander definition of two subcommands, each with its table. */
export function registerDeletes(program: Command): void {
  const deletes = program
    .command('deletes')
    .summary('review and apply the soft-deletes the delete guard held back')
    .description(
      "A day's rows that its export no longer holds are marked deleted (_deleted_at) when the day is " +
        'loaded, but only from an export known to be complete, and only up to CRS_DELETE_GUARD percent ' +
        "of the day's live rows (default 10). Past that, the ids are held in held_deletes and nothing is " +
        'deleted until you apply them here (or a later complete load of the day, within the guard, ' +
        'replaces the held set). Any later load that reads a held id again takes it out of the held ' +
        'set: the source still holds it. `list` shows the held days; `apply` marks them deleted.',
    );

  deletes
    .command('list')
    .summary('the days with held deletes, or the held ids of one day')
    .description(
      'list the days with held deletes: how many ids, how many are still live (what apply would ' +
        'delete now), the live rows of the day and why they were held',
    )
    .option('--day <day>', 'only this day (YYYY-MM-DD); with --ids, also its message ids')
    .option('--ids', 'print the held message ids of --day')
    .option('--limit <n>', 'with --ids, at most this many ids (default 1000)')
    .option('--json', 'print JSON')
    .action(async (o: { day?: string; ids?: boolean; limit?: string; json?: boolean }) => {
      const day = o.day === undefined ? undefined : checkDay(o.day);
      if (o.ids && day === undefined) throw new CrsError('USAGE', '--ids needs --day');
      const limit = o.limit === undefined ? 1000 : Number(o.limit);
      if (!Number.isInteger(limit) || limit <= 0)
        throw new CrsError('USAGE', '--limit takes a positive whole number');
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1, schema: 'current' });
      try {
        const days = await listHeldDeletes(wh.warehouse.db, day);
        const ids = o.ids && day !== undefined ? await heldIds(wh.warehouse.db, day, limit) : undefined;
        const printed = printRows(days, {
          json: o.json,
          asJson: { document: { days, ...(ids ? { ids } : {}) } },
          none: `no held deletes${day ? ` for ${day}` : ''}`,
          head: ['day', 'held', 'still live', 'live rows', 'held at (UTC)', 'load id', 'reason'],
          cells: (d) => [
            d.day,
            d.held,
            d.applicable,
            d.live,
            d.heldAt.slice(0, 19).replace('T', ' '),
            d.loadId,
            d.forceReason === null ? (d.reason ?? '') : `needs --force: ${d.forceReason}`,
          ],
        });
        if (printed !== 'table') return;
        if (ids) process.stdout.write(`\n${ids.join('\n')}\n`);
        process.stdout.write('\nApply with: crs-sync deletes apply --day DAY   (or --all)\n');
      } finally {
        await wh.close();
      }
    });

  deletes
    .command('apply')
    .summary('mark the held rows of some days (or all) deleted')
    .description(
      'mark the held rows deleted, day by day. Each id is checked again: a row no longer live, no ' +
        'longer of that day, or written by a load since it was held is left alone. The held set of ' +
        "each applied day is emptied and the day's rows_deleted counted again. A day whose load " +
        'quarantined a line with no readable message id (it may be one of the held rows) is skipped, ' +
        'with the reason, unless you name it with --day and --force.',
    )
    .option('--day <day...>', 'apply the held deletes of these days (YYYY-MM-DD)')
    .option('--all', 'apply the held deletes of every day (never those that need --force)')
    .option(
      '--force',
      'with --day: also apply days held because a quarantined line had no readable id (check them first)',
    )
    .option('--json', 'print JSON')
    .action(async (o: { day?: string[]; all?: boolean; force?: boolean; json?: boolean }) => {
      if (!o.all && (o.day === undefined || o.day.length === 0))
        throw new CrsError('USAGE', 'name the days with --day DAY (or every held day with --all)');
      if (o.all && o.day) throw new CrsError('USAGE', '--day and --all exclude each other');
      if (o.force && !o.day) throw new CrsError('USAGE', '--force applies only to days named with --day');
      const days = o.day?.map(checkDay);
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1 });
      try {
        const applied = await applyHeldDeletes(wh.warehouse.db, days, { force: o.force === true });
        // The soft-deletes marked their days for the rollups; bring them up to date now, as a
        // load's finalize would, so the dashboard and the views read rollups again at once.
        await refreshRollups(wh.warehouse.pool);
        printRows(applied, {
          json: o.json,
          asJson: { document: { applied } },
          none: 'no held deletes to apply',
          head: ['day', 'held', 'deleted', 'left alone', 'note'],
          cells: (a) => [
            a.day,
            a.held,
            a.deleted,
            a.skipped,
            a.notApplied === null ? '' : `not applied, needs --force: ${a.notApplied}`,
          ],
        });
      } finally {
        await wh.close();
      }
    });
}
