import type { Command } from 'commander';
import { renderTable } from '../../common/table.ts';
import { CrsError } from '../../errors.ts';
import { replayRejects } from '../../ingest/source/replay.ts';
import { dismissRejects, listRejects, type RejectFilter } from '../../warehouse/quarantine.ts';
import type { RejectSource } from '../../warehouse/types.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';
import { printRows } from '../output.ts';

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

/** How a reject stands, for `list`: open, or how it closed and why. */
function stateOf(r: {
  replayed_at: Date | null;
  resolution: string | null;
  replay_result: string | null;
}): string {
  if (r.replayed_at === null) return r.replay_result ? `open (${r.replay_result})` : 'open';
  return r.replay_result ?? r.resolution ?? 'replayed';
}

/** `crs-sync rejects list|replay|dismiss`. Long: one commander definition of three subcommands, each with its table. */
export function registerRejects(program: Command): void {
  const rejects = program
    .command('rejects')
    .summary('inspect the quarantine (rejected_records) and replay rows after a fix')
    .description(
      'Lines and entries that broke the record contract are kept in rejected_records with the raw\n' +
        'text as received, where they came from and why. `list` shows them; `replay` loads them again\n' +
        'once the cause is fixed; `dismiss` closes those that need no replay. A reject whose line a\n' +
        'complete load of its day no longer quarantines (the service corrected or dropped it) is\n' +
        'closed by that load.',
    );

  withFilters(
    rejects
      .command('list')
      .description(
        'list open rejects, newest first: one per line, however many loads read it (loads: how many;\n' +
          'the first load and its line number, and the last load); with --all or --id, closed ones too,\n' +
          'with how they closed',
      ),
  )
    .option(
      '--all',
      'include closed rejects (replayed, dismissed, or gone from a complete load of their day)',
    )
    .option('--json', 'print JSON lines (one reject per line, raw included)')
    .action(async (o: FilterOpts & { all?: boolean; json?: boolean }) => {
      const f = parseFilter(o);
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1, schema: 'current' });
      try {
        // Asked for by id: shown whatever their state.
        const rows = await listRejects(wh.warehouse.db, f, {
          includeReplayed: o.all === true || f.ids !== undefined,
        });
        printRows(rows, {
          json: o.json,
          asJson: {
            line: ({ raw_bytes, ...rest }) => ({
              ...rest,
              raw_bytes_base64: raw_bytes?.toString('base64') ?? null,
            }),
          },
          none: 'no rejects match',
          head: [
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
            'state',
          ],
          cells: (r) => [
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
            stateOf(r).slice(0, 80),
          ],
        });
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
    .option(
      '--dry-run',
      'write nothing: read each selected line with the current parser and contract and say what a replay would load and what would stay rejected (by code)',
    )
    .action(async (o: FilterOpts & { dryRun?: boolean }) => {
      const f = parseFilter(o);
      const dryRun = o.dryRun === true;
      const ctx = loadContext();
      // A dry run only reads: it neither migrates nor creates a warehouse.
      const wh = await openConfiguredWarehouse(ctx, {
        connections: 2,
        ...(dryRun ? { schema: 'current' } : {}),
      });
      try {
        const r = await replayRejects(wh.warehouse, ctx.config, ctx.log, f, { dryRun });
        const would = (done: string, then: string) => (dryRun ? then : done);
        const codes = Object.entries(r.stillRejectedByCode)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([code, n]): [string, string] => [`  ${code}`, String(n)]);
        process.stdout.write(
          `${renderTable(
            [dryRun ? 'replay (dry run: nothing written)' : 'replay', ''],
            [
              ['selected', String(r.selected)],
              [would('loaded', 'would load'), String(r.loaded)],
              [would('still rejected', 'would stay rejected'), String(r.stillRejected)],
              ...codes,
              ['not replayable (prefix only)', String(r.notReplayable)],
              [would('threads re-queued', 'threads that would be re-queued'), String(r.threadsRequeued)],
              ...(r.replayLoadId ? [['replay load id', r.replayLoadId]] : []),
            ],
          )}\n`,
        );
      } finally {
        await wh.close();
      }
    });

  rejects
    .command('dismiss')
    .description(
      'close open rejects that need no replay (the line is wrong for good, or was fixed by other means), ' +
        'with a reason: they leave the open counts (status, sync_health.open_rejects, the metrics) and keep ' +
        'their row; `rejects list --all` shows the reason',
    )
    .requiredOption('--id <id...>', 'the rejects to close (ids from rejects list)')
    .requiredOption('--reason <text>', 'why they are closed (shown by rejects list)')
    .action(async (o: { id: string[]; reason: string }) => {
      const ids = parseFilter({ id: o.id }).ids ?? [];
      const reason = o.reason.trim();
      if (reason === '') throw new CrsError('USAGE', '--reason must say why');
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1 });
      try {
        const r = await dismissRejects(wh.warehouse.db, ids.map(String), reason);
        process.stdout.write(
          `dismissed ${r.dismissed.length} reject(s)${r.dismissed.length ? `: ${r.dismissed.join(', ')}` : ''}\n`,
        );
        if (r.alreadyClosed.length > 0)
          process.stderr.write(
            `crs-sync: already closed, left as they were: ${r.alreadyClosed.join(', ')}\n`,
          );
        if (r.unknown.length > 0) {
          throw new CrsError('USAGE', `no reject has the id(s) ${r.unknown.join(', ')}`);
        }
      } finally {
        await wh.close();
      }
    });
}
