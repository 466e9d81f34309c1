import cliProgress from 'cli-progress';
import { type Command, Option } from 'commander';
import { formatBytes, formatDuration, renderTable } from '../../common/table.ts';
import { CrsError, EXIT_FAILURE } from '../../errors.ts';
import type { LoadSummary } from '../../ingest/merge/load.ts';
import { importFile } from '../../ingest/source/import-file.ts';
import { checkRange, dayOption } from '../args.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';

/**
 * `crs-sync import`. Long: commander's declarations, the help text and the progress bar's
 * set-up sit in one place; the work is importFile's.
 */
export function registerImport(program: Command): void {
  program
    .command('import')
    .summary('load a JSONL export file (or - for stdin) into the warehouse, without Temporal or HTTP')
    .description(
      'Loads a JSONL analytics export, as downloaded from the service, through the same parser and\n' +
        'loader as the scheduled sync. One file may hold many days. Bad lines are quarantined in\n' +
        'rejected_records (see `crs-sync rejects list`) and the rest still loads; the exit status is 1\n' +
        'only when the load itself fails.\n\n' +
        'An interrupted import resumes where it stopped when run again on the same unchanged file\n' +
        '(or with the same --load-id). Re-importing a file changes no row.\n\n' +
        'With --from/--to the file is declared the complete export of those UTC days: rows of those\n' +
        'days that the file lacks are marked deleted (_deleted_at), and the days are marked complete\n' +
        'in the ledger. Without them, nothing is deleted.',
    )
    .argument('<file>', 'path of the JSONL file, or - to read standard input')
    .option('--load-id <id>', 'load id to use or to resume (default: derived from the file)')
    .option('--from <day>', 'first UTC day the file is the complete export of (YYYY-MM-DD)')
    .option('--to <day>', 'last UTC day the file is the complete export of (YYYY-MM-DD)')
    .addOption(new Option('--json', 'print the summary as JSON on stdout'))
    .option('--no-progress', 'no progress bar on stderr')
    .addHelpText(
      'after',
      '\nExamples:\n  crs-sync import message_history_20261121.jsonl\n' +
        '  curl -s ... | crs-sync import - --load-id nightly-2026-11-21\n' +
        '  crs-sync import week.jsonl --from 2026-11-14 --to 2026-11-20',
    )
    .action(
      async (
        file: string,
        opts: { loadId?: string; from?: string; to?: string; json?: boolean; progress: boolean },
      ) => {
        const wholeDays = wholeDaysOf(opts);
        const ctx = loadContext();
        const wh = await openConfiguredWarehouse(ctx);
        const abort = new AbortController();
        const onSignal = () => abort.abort(new Error('interrupted'));
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        const showBar = opts.progress && process.stderr.isTTY === true && !opts.json;
        let bar: cliProgress.SingleBar | null = null;
        try {
          const summary = await importFile(wh.warehouse, ctx.config, ctx.log, {
            file,
            ...(opts.loadId ? { loadId: opts.loadId } : {}),
            wholeDays,
            signal: abort.signal,
            onStart: ({ loadId, totalBytes, resuming }) => {
              ctx.log.info({ loadId, warehouse: wh.description, resuming }, 'import started');
              if (showBar) {
                bar = new cliProgress.SingleBar(
                  {
                    stream: process.stderr,
                    format: totalBytes
                      ? ' {bar} {percentage}% | {mb}/{totalMb} MB | {rows} rows | {rejected} rejected | eta {eta_formatted}'
                      : ' {mb} MB | {rows} rows | {rejected} rejected',
                    hideCursor: true,
                    clearOnComplete: true,
                  },
                  cliProgress.Presets.shades_classic,
                );
                bar.start(totalBytes ?? 1, 0, {
                  mb: '0',
                  totalMb: ((totalBytes ?? 0) / 1e6).toFixed(0),
                  rows: 0,
                  rejected: 0,
                });
              }
            },
            onProgress: (p) =>
              bar?.update(p.bytesRead, {
                mb: (p.bytesRead / 1e6).toFixed(0),
                rows: p.rowsRead.toLocaleString('en-US'),
                rejected: p.rejected,
              }),
          });
          (bar as cliProgress.SingleBar | null)?.stop();
          printSummary(summary, opts.json === true, wholeDays !== null);
        } catch (err) {
          (bar as cliProgress.SingleBar | null)?.stop();
          if (err instanceof CrsError && err.code === 'CANCELLED') {
            process.stderr.write('crs-sync: import interrupted; run the same command again to resume it\n');
            process.exitCode = EXIT_FAILURE;
            return;
          }
          throw err;
        } finally {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
          await wh.close();
        }
      },
    );
}

/** The days --from/--to declare the file the complete export of, or null without them. */
function wholeDaysOf(opts: { from?: string; to?: string }): { from: string; to: string } | null {
  if ((opts.from === undefined) !== (opts.to === undefined))
    throw new CrsError('USAGE', '--from and --to go together');
  const from = dayOption('--from', opts.from);
  const to = dayOption('--to', opts.to);
  if (from === undefined || to === undefined) return null;
  checkRange(from, to);
  return { from, to };
}

/** What to do about deletes the guard held, in the summary and its JSON. */
export const HELD_HINT =
  'deletes held by the delete guard (CRS_DELETE_GUARD): review with crs-sync deletes list, apply with crs-sync deletes apply';

function printSummary(s: LoadSummary, json: boolean, complete: boolean): void {
  const held = s.days.reduce((n, d) => n + d.deletesHeld, 0);
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ ...s, held, ...(held > 0 ? { hint: HELD_HINT } : {}) }, null, 2)}\n`,
    );
    return;
  }
  const secs = Math.max(s.elapsedMs, 1) / 1000;
  const rows: (string | number)[][] = [
    ['load id', s.loadId],
    ['lines read', s.linesRead],
    ['bytes read', formatBytes(s.bytesRead)],
    ['records read', s.rowsRead],
    ['inserted', s.inserted],
    ['updated', s.updated],
    ['unchanged', s.unchanged],
    ['rejected', s.rejected],
    // Only once something was erased (`crs-sync forget`): most warehouses never suppress a line.
    ...(s.suppressed > 0
      ? [['suppressed (erased users and threads)', s.suppressed] as [string, number]]
      : []),
    ['marked deleted', s.deleted],
    // Only a load of complete days deletes, or holds its deletes.
    ...(complete || held > 0 ? [['deletes held for review', held] as [string, number]] : []),
    ['threads queued for enrichment', s.threadsQueued],
    ['elapsed', formatDuration(s.elapsedMs)],
    [
      'throughput',
      `${Math.round(s.linesRead / secs).toLocaleString('en-US')} lines/s, ${(s.bytesRead / 1e6 / secs).toFixed(1)} MB/s`,
    ],
  ];
  if (s.resumed) rows.splice(1, 0, ['resumed from line', s.resumedFromLine]);
  process.stdout.write(
    `${renderTable(
      ['import', ''],
      rows.map(([label, v]) => [
        String(label),
        typeof v === 'number' ? v.toLocaleString('en-US') : String(v),
      ]),
    )}\n`,
  );
  if (s.days.length > 0 && s.days.length <= 62) {
    process.stdout.write(
      `\n${renderTable(
        ['day (UTC)', 'read', 'inserted', 'updated', 'unchanged', 'rejected', 'deleted', 'held'],
        s.days.map((d) => [
          d.day,
          d.rowsRead,
          d.inserted,
          d.updated,
          d.unchanged,
          d.rejected,
          d.deleted,
          d.deletesHeld,
        ]),
      )}\n`,
    );
  }
  if (held > 0) process.stdout.write(`\n${held} ${HELD_HINT}\n`);
  if (s.rejected > 0)
    process.stdout.write('\nRejected lines are in rejected_records: crs-sync rejects list\n');
}
