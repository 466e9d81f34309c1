import type { Command } from 'commander';
import { renderTable } from '../../shared/table.ts';
import { readStatus } from '../../warehouse/status.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';

/** `crs-sync status`. Long only because it prints each section of readStatus in turn. */
export function registerStatus(program: Command): void {
  program
    .command('status')
    .summary('watermark, lag, days by status, recent runs, rejects, held deletes, enrichment')
    .description(
      'Shows the state of the warehouse: the watermark (last day of the unbroken run of complete\n' +
        'days) and the lag to yesterday (UTC), days by status and the failed ones, the last runs,\n' +
        'the quarantine by source and error code, the deletes held by the delete guard, the days whose\n' +
        'export was not known complete, and threads by enrichment status. Runs and days still marked\n' +
        'running with no sign of life for 14 minutes (terminated, worker gone) are shown as abandoned.',
    )
    .option('--json', 'print the status as JSON')
    .action(async (opts: { json?: boolean }) => {
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1 });
      try {
        const s = await readStatus(wh.warehouse.db);
        if (opts.json) {
          process.stdout.write(`${JSON.stringify(s, null, 2)}\n`);
          return;
        }
        const out: string[] = [];
        out.push(`warehouse   ${wh.description}`);
        out.push(
          `watermark   ${s.watermark ?? '(no complete day yet)'}${s.lagDays === null ? '' : `   lag ${s.lagDays} day(s)`}`,
        );
        out.push(
          `days        ${
            Object.entries(s.days)
              .map(([k, v]) => `${k} ${v}`)
              .join(', ') || '(none)'
          }`,
        );
        out.push(
          `messages    ${s.messages.live.toLocaleString('en-US')} live, ${s.messages.deleted.toLocaleString('en-US')} marked deleted`,
        );
        out.push(
          `threads     ${
            Object.entries(s.threads)
              .map(([k, v]) => `${k} ${v}`)
              .join(', ') || '(none)'
          }`,
        );
        if (s.failedDays.length > 0) {
          out.push('', 'Failed days:');
          out.push(
            renderTable(
              ['day', 'attempts', 'last error'],
              s.failedDays.map((f) => [f.day, f.attempts, (f.lastError ?? '').slice(0, 100)]),
            ),
          );
        }
        if (s.abandonedDays.length > 0) {
          out.push(
            '',
            `Abandoned days (marked running, no sign of life for ${s.staleAfterMinutes} min; the next load of each takes it over):`,
          );
          out.push(
            renderTable(
              ['day', 'load id', 'attempts', 'last sign of life (UTC)'],
              s.abandonedDays.map((d) => [
                d.day,
                d.loadId ?? '',
                d.attempts,
                (d.lastSignOfLife ?? '').slice(0, 19).replace('T', ' '),
              ]),
            ),
          );
        }
        if (s.heldDeletes.length > 0) {
          out.push(
            '',
            'Held deletes (past CRS_DELETE_GUARD; review: crs-sync deletes list, apply: crs-sync deletes apply):',
          );
          out.push(
            renderTable(
              ['day', 'held', 'still live', 'live rows', 'reason'],
              s.heldDeletes.map((h) => [h.day, h.held, h.applicable, h.live, h.reason ?? '']),
            ),
          );
        }
        if (s.incompleteExports.length > 0) {
          out.push('', 'Exports not known complete (loaded, nothing of the day deleted):');
          out.push(
            renderTable(
              ['day', 'load id', 'why'],
              s.incompleteExports.map((d) => [d.day, d.loadId ?? '', (d.reason ?? '').slice(0, 100)]),
            ),
          );
        }
        if (s.recentRuns.length > 0) {
          out.push('', 'Recent runs:');
          out.push(
            renderTable(
              [
                'load id',
                'kind',
                'status',
                'window',
                'read',
                'inserted',
                'updated',
                'rejected',
                'deleted',
                'started (UTC)',
              ],
              s.recentRuns.map((r) => [
                r.loadId,
                r.kind,
                r.status,
                r.window ?? '',
                r.rowsRead,
                r.inserted,
                r.updated,
                r.rejected,
                r.deleted,
                r.startedAt.slice(0, 19).replace('T', ' '),
              ]),
            ),
          );
        }
        if (s.rejects.length > 0) {
          out.push('', 'Quarantine (rejected_records):');
          out.push(
            renderTable(
              ['source', 'error code', 'open', 'replayed'],
              s.rejects.map((r) => [r.source, r.errorCode, r.open, r.replayed]),
            ),
          );
        }
        process.stdout.write(`${out.join('\n')}\n`);
      } finally {
        await wh.close();
      }
    });
}
