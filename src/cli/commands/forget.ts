import type { Command } from 'commander';
import { storedUserIds } from '../../common/pseudonym.ts';
import { CrsError } from '../../errors.ts';
import { type ForgetResult, forget, listErasures } from '../../warehouse/privacy/forget.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';
import { printRows } from '../output.ts';

const collectIds = (v: string, prev: string[] = []): string[] => [
  ...prev,
  ...v
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter((s) => s !== ''),
];

function printResult(r: ForgetResult, json: boolean | undefined): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
    return;
  }
  const rows = Object.entries(r.rows);
  printRows(rows, {
    json: false,
    asJson: { document: r },
    none: '',
    head: ['table', r.dryRun ? 'rows that would be erased' : 'rows erased'],
    cells: ([t, n]) => [t, n],
  });
  const who = `${r.users} user(s), ${r.threads} thread(s)`;
  process.stdout.write(
    r.dryRun
      ? `\ndry run: nothing erased (${who}). Run again without --dry-run to erase them.\n`
      : `\nerasure ${r.erasureId}: ${who} erased; later loads and enrichment drop them ` +
          `(rollups: ${r.rollups.days} day(s), ${r.rollups.threads} thread(s) corrected).\n`,
  );
}

interface ForgetOptions {
  user?: string[];
  thread?: string[];
  reason?: string;
  dryRun?: boolean;
  json?: boolean;
}

async function runForget(o: ForgetOptions): Promise<void> {
  const users = o.user ?? [];
  const threads = o.thread ?? [];
  if (users.length === 0 && threads.length === 0)
    throw new CrsError('USAGE', 'name at least one --user ID or --thread ID (or run `crs-sync forget list`)');
  const ctx = loadContext();
  const wh = await openConfiguredWarehouse(ctx, { connections: 2 });
  try {
    const r = await forget(
      wh.warehouse.pool,
      { users, threads },
      {
        ...(o.reason === undefined ? {} : { reason: o.reason }),
        dryRun: o.dryRun === true,
        storedUserId: storedUserIds(ctx.config.userIds),
      },
    );
    printResult(r, o.json);
  } finally {
    await wh.close();
  }
}

async function listAll(json: boolean): Promise<void> {
  const ctx = loadContext();
  const wh = await openConfiguredWarehouse(ctx, { connections: 1, schema: 'current' });
  try {
    const erasures = await listErasures(wh.warehouse.pool);
    printRows(erasures, {
      json,
      asJson: { document: { erasures } },
      none: 'no erasures',
      head: ['id', 'erased at (UTC)', 'users', 'threads', 'rows', 'reason'],
      cells: (e) => [
        e.id,
        e.erasedAt.slice(0, 19).replace('T', ' '),
        e.users,
        e.threads,
        Object.values(e.rows).reduce((a, b) => a + b, 0),
        e.reason ?? '',
      ],
    });
  } finally {
    await wh.close();
  }
}

/** `crs-sync forget` and `crs-sync forget list`. */
export function registerForget(program: Command): void {
  const cmd = program
    .command('forget')
    .summary('erase users or threads from every table, and keep them out of every later load')
    .description(
      'Erase every row of the named users (and all of their threads) or threads: export rows, threads, ' +
        'history, citations, artifacts, the quarantine lines that name them, held deletes; the rollups ' +
        'are corrected in the same transaction, so readers see them whole or gone, never half.\n' +
        'The ids go on a suppression list, as a keyed hash (never the plain id): every later import, ' +
        "sync, backfill, intraday pull and rejects replay drops their lines (counted 'suppressed'), and " +
        'enrichment skips their threads. The service keeps its own copy: ask its operator to erase it there.\n' +
        'Ids are UUIDs, repeated or comma-separated. Try --dry-run first.',
    )
    .option('--user <id...>', 'erase these users (and every thread of theirs)', collectIds)
    .option('--thread <id...>', 'erase these threads', collectIds)
    .option(
      '--reason <text>',
      'why (kept with the erasure: a ticket, a request number; never put the id here)',
    )
    .option('--dry-run', 'count what would be erased; erase nothing')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExamples:\n' +
        '  crs-sync forget --user 0b6f…-…  --dry-run\n' +
        '  crs-sync forget --user 0b6f…-… --reason "DSR-1234"\n' +
        '  crs-sync forget list',
    )
    .action(runForget);

  cmd
    .command('list')
    .summary('the erasures made: when, why, how many rows per table (never the ids)')
    .description(
      'list every erasure: its id, when it ran, how many users and threads, the rows erased and the ' +
        'reason given. The ids themselves are kept nowhere (the suppression list holds keyed hashes).',
    )
    .option('--json', 'print JSON')
    // `forget` has a --json of its own, and commander gives it a --json written after `list`.
    .action((own: { json?: boolean }) =>
      listAll(own.json === true || cmd.opts<{ json?: boolean }>().json === true),
    );
}
