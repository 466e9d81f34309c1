import type { Command } from 'commander';
import { renderTable } from '../../common/table.ts';
import { CrsError } from '../../errors.ts';
import { replayRejects } from '../../ingest/replay.ts';
import { listRejects, type RejectFilter } from '../../warehouse/quarantine.ts';
import type { RejectSource } from '../../warehouse/types.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';

const SOURCES = ['export', 'history', 'artifact', 'file'];

interface FilterOpts {
  source?: string;
  code?: string;
  loadId?: string;
  id?: string[];
  limit?: string;
}

function parseFilter(o: FilterOpts): RejectFilter {
  if (o.source && !SOURCES.includes(o.source)) {
    throw new CrsError('USAGE', `--source must be one of ${SOURCES.join(', ')}`);
  }
  const ids = (o.id ?? []).map((v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n <= 0)
      throw new CrsError('USAGE', `--id takes positive whole numbers, not "${v}"`);
    return n;
  });
  const limit = o.limit === undefined ? undefined : Number(o.limit);
  if (limit !== undefined && (!Number.isInteger(limit) || limit <= 0)) {
    throw new CrsError('USAGE', '--limit takes a positive whole number');
  }
  return {
    ...(ids.length > 0 ? { ids } : {}),
    ...(o.source ? { source: o.source as RejectSource } : {}),
    ...(o.code ? { errorCode: o.code } : {}),
    ...(o.loadId ? { loadId: o.loadId } : {}),
    ...(limit ? { limit } : {}),
  };
}

function withFilters(cmd: Command): Command {
  return cmd
    .option('--source <source>', `only rejects from this source (${SOURCES.join(', ')})`)
    .option('--code <code>', 'only rejects with this error code (e.g. invalid_json, invalid_uuid)')
    .option('--load-id <id>', 'only rejects this load read first or last')
    .option('--id <id...>', 'only these reject ids')
    .option('--limit <n>', 'at most this many');
}

/** `crs-sync rejects list|replay`. Long: one commander definition of two subcommands, each with its table. */
export function registerRejects(program: Command): void {
  const rejects = program
    .command('rejects')
    .summary('inspect the quarantine (rejected_records) and replay rows after a fix')
    .description(
      'Lines and entries that broke the record contract are kept in rejected_records with the raw\n' +
        'text as received, where they came from and why. `list` shows them; `replay` loads them again\n' +
        'once the cause is fixed.',
    );

  withFilters(
    rejects
      .command('list')
      .description(
        'list open (not yet replayed) rejects, newest first: one per line, however many loads read it\n' +
          '(loads: how many; the first load and its line number, and the last load)',
      ),
  )
    .option('--all', 'include replayed rejects')
    .option('--json', 'print JSON lines (one reject per line, raw included)')
    .action(async (o: FilterOpts & { all?: boolean; json?: boolean }) => {
      const f = parseFilter(o);
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1, schema: 'current' });
      try {
        const rows = await listRejects(wh.warehouse.db, f, { includeReplayed: o.all === true });
        if (o.json) {
          for (const r of rows) {
            const { raw_bytes, ...rest } = r;
            process.stdout.write(
              `${JSON.stringify({ ...rest, raw_bytes_base64: raw_bytes?.toString('base64') ?? null })}\n`,
            );
          }
          return;
        }
        if (rows.length === 0) {
          process.stdout.write('no rejects match\n');
          return;
        }
        process.stdout.write(
          `${renderTable(
            [
              'id',
              'source',
              'day',
              'loads',
              'first load id',
              'line',
              'last load id',
              'message id',
              'code',
              'detail',
              'raw (start)',
            ],
            rows.map((r) => [
              r.id,
              r.source,
              r.day ?? '',
              r.times_seen,
              r._load_id,
              r.line_no === null ? '' : String(r.line_no),
              r.last_load_id,
              r.message_id ?? '',
              r.error_code,
              r.error_detail.slice(0, 60),
              r.raw.slice(0, 40).replace(/\s+/g, ' '),
            ]),
          )}\n`,
        );
      } finally {
        await wh.close();
      }
    });

  withFilters(
    rejects
      .command('replay')
      .description(
        'load open rejects again through the current parser and loader; rows that load are marked\n' +
          'replayed, rows that fail again stay open with the new reason. History and artifact rejects\n' +
          're-queue their thread for enrichment.',
      ),
  )
    .option('--dry-run', 'only count what would be replayed')
    .action(async (o: FilterOpts & { dryRun?: boolean }) => {
      const f = parseFilter(o);
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 2 });
      try {
        const r = await replayRejects(wh.warehouse, ctx.config, ctx.log, f, { dryRun: o.dryRun === true });
        process.stdout.write(
          `${renderTable(
            ['replay', ''],
            [
              ['selected', String(r.selected)],
              ['loaded', String(r.loaded)],
              ['still rejected', String(r.stillRejected)],
              ['not replayable (prefix only)', String(r.notReplayable)],
              ['threads re-queued', String(r.threadsRequeued)],
              ...(r.replayLoadId ? [['replay load id', r.replayLoadId]] : []),
            ],
          )}\n`,
        );
      } finally {
        await wh.close();
      }
    });
}
